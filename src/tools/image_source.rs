//! Image loading shared by `read_image` and `describe_image`: a local path (relative → the
//! workspace) or an http(s) URL, at most 5 MiB, png/jpeg/gif/webp sniffed by content (then the
//! response type, then the extension), scaled down to 2000 px on the longest side when larger.
//! (Which image tool a model gets is the penguin profile's `image_tools`.)
//!
//! It owns the exact error texts of `docs/tools.md#read_image`. It never talks to a model.

#[cfg(feature = "images")]
use std::io::Cursor;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
#[cfg(feature = "images")]
use image::{DynamicImage, ImageFormat, ImageReader};
use tokio_util::sync::CancellationToken;

use super::capped_read::{Capped, read_capped};
use super::file_target::{TargetError, open_regular};

/// Largest accepted image (bytes).
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Longest side (px) an image is sent with; larger ones are scaled down.
pub const MAX_IMAGE_SIDE: u32 = 2000;
/// JPEG quality of a re-encoded JPEG.
#[cfg(feature = "images")]
const JPEG_QUALITY: u8 = 85;

const SUPPORTED: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// A loaded, validated image.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedImage {
    /// The image's bytes.
    pub bytes: Vec<u8>,
    /// Its MIME type (`image/png`, …).
    pub mime: String,
}

/// Why an image was not loaded.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadError {
    /// The call was cancelled while loading.
    Aborted,
    /// The exact text for the model.
    Failed(String),
}

/// Why an image could not be scaled down (the texts are the model's). Its variants depend on the
/// `images` feature.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScaleError {
    /// Reading the image's format failed.
    #[error("Failed to scale down the image ({w}×{h} px): {source}")]
    Read {
        /// The image's width in pixels.
        w: u32,
        /// Its height in pixels.
        h: u32,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Decoding the image failed.
    #[cfg(feature = "images")]
    #[error("Failed to scale down the image ({w}×{h} px): {source}")]
    Decode {
        /// The image's width in pixels.
        w: u32,
        /// Its height in pixels.
        h: u32,
        /// The decoder's error.
        #[source]
        source: image::ImageError,
    },
    /// Encoding the smaller image failed.
    #[cfg(feature = "images")]
    #[error("Failed to re-encode the image: {0}")]
    Encode(#[source] image::ImageError),
    /// This build cannot decode images (no `images` feature).
    #[error(
        "Cannot read the image: this build has no image support (rebuild with the `images` feature)."
    )]
    NotBuilt,
}

/// The image as it is sent: possibly scaled down and re-encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The MIME type sent.
    pub mime: String,
    /// Bytes sent (after any scaling).
    pub size: u64,
    /// The `data:<mime>;base64,…` URL.
    pub data_url: String,
    /// `(from_w, from_h, to_w, to_h)` when scaled down.
    pub scaled: Option<(u32, u32, u32, u32)>,
}

/// `N B`, `N.N kB` or `N.N MB` (1024-based, one decimal).
pub fn format_size(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let kb = bytes as f64 / 1024.0;
    if kb < 1024.0 {
        return format!("{kb:.1} kB");
    }
    format!("{:.1} MB", kb / 1024.0)
}

fn oversize(size: u64) -> String {
    format!(
        "Image too large: {} exceeds the {} limit.",
        format_size(size),
        format_size(MAX_IMAGE_BYTES)
    )
}

fn unsupported(mime: Option<&str>) -> String {
    match mime {
        Some(m) => {
            format!("Unsupported image type \"{m}\": only png, jpeg, gif and webp are supported.")
        }
        None => "Unsupported image type: only png, jpeg, gif and webp are supported.".to_string(),
    }
}

/// The mime type by magic number.
pub fn sniff_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0x89, b'P', b'N', b'G']) && bytes.len() >= 8 {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn mime_from_ext(path: &str) -> Option<&'static str> {
    let ext = Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

fn is_http_url(source: &str) -> bool {
    let lower = source.get(..8).unwrap_or(source).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

fn http() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_else(|e| {
                tracing::warn!("image download client: {e}; using the defaults");
                reqwest::Client::new()
            })
    })
}

/// Reads and validates an image. Never panics; every failure is the documented text.
pub async fn load_image(
    source: &str,
    workspace: &Path,
    cancel: &CancellationToken,
) -> Result<LoadedImage, LoadError> {
    if cancel.is_cancelled() {
        return Err(LoadError::Aborted);
    }
    let work = async {
        if is_http_url(source) {
            download(source).await
        } else {
            read_local(source, workspace).await
        }
    };
    let (bytes, mime) = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(LoadError::Aborted),
        r = work => r?,
    };
    if bytes.is_empty() {
        return Err(LoadError::Failed(format!("Image \"{source}\" is empty.")));
    }
    let size = bytes.len() as u64;
    if size > MAX_IMAGE_BYTES {
        return Err(LoadError::Failed(oversize(size)));
    }
    match mime {
        Some(m) if SUPPORTED.contains(&m.as_str()) => Ok(LoadedImage { bytes, mime: m }),
        other => Err(LoadError::Failed(unsupported(other.as_deref()))),
    }
}

async fn read_local(
    source: &str,
    workspace: &Path,
) -> Result<(Vec<u8>, Option<String>), LoadError> {
    let path = super::resolve_path(workspace, source);
    let failed =
        |e: std::io::Error| LoadError::Failed(format!("Failed to read image \"{source}\": {e}"));
    // Opened once, never blocking; the kind and the size are the opened file's (`fstat`), and
    // the read stops past the cap, so a symlink swapped after a look (to a FIFO, a device or a
    // huge file) is never read.
    let read = tokio::task::spawn_blocking(move || -> Result<Capped, TargetError> {
        let opened = open_regular(&path)?;
        Ok(read_capped(&opened, MAX_IMAGE_BYTES)?)
    })
    .await
    .map_err(|e| failed(std::io::Error::other(e)))?;
    let bytes = match read {
        Ok(Capped::Whole(bytes)) => bytes,
        Ok(Capped::TooLarge { size }) => return Err(LoadError::Failed(oversize(size))),
        Err(TargetError::NotRegular(_)) => {
            return Err(LoadError::Failed(format!(
                "Failed to read image \"{source}\": path is not a file."
            )));
        }
        Err(TargetError::Io(e)) => return Err(failed(e)),
    };
    let mime = sniff_mime(&bytes)
        .or_else(|| mime_from_ext(source))
        .map(str::to_string);
    Ok((bytes, mime))
}

async fn download(source: &str) -> Result<(Vec<u8>, Option<String>), LoadError> {
    let failed = |detail: String| {
        LoadError::Failed(format!("Failed to download image \"{source}\": {detail}"))
    };
    let response = http()
        .get(source)
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(failed(format!("HTTP {}", status.as_u16())));
    }
    if let Some(declared) = response.content_length()
        && declared > MAX_IMAGE_BYTES
    {
        return Err(LoadError::Failed(oversize(declared)));
    }
    let header_mime = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let mut bytes = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| failed(e.to_string()))?;
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > MAX_IMAGE_BYTES {
            return Err(LoadError::Failed(oversize(bytes.len() as u64)));
        }
    }
    let url_path = source.split(['?', '#']).next().unwrap_or(source);
    let mime = if SUPPORTED.contains(&header_mime.as_str()) {
        Some(header_mime)
    } else {
        sniff_mime(&bytes)
            .or_else(|| mime_from_ext(url_path))
            .map(str::to_string)
            .or((!header_mime.is_empty()).then_some(header_mime))
    };
    Ok((bytes, mime))
}

/// Scales an image larger than [`MAX_IMAGE_SIDE`] down and re-encodes it (png stays png, jpeg
/// stays jpeg, gif and webp become png; a png over the byte limit becomes jpeg). CPU-bound:
/// call it on the blocking pool. An image whose size cannot be read is sent as it is.
#[cfg(feature = "images")]
pub fn prepare(image: &LoadedImage) -> Result<Prepared, ScaleError> {
    let as_is = || Prepared {
        mime: image.mime.clone(),
        size: image.bytes.len() as u64,
        data_url: data_url(&image.mime, &image.bytes),
        scaled: None,
    };
    let reader = || ImageReader::new(Cursor::new(&image.bytes)).with_guessed_format();
    let Ok((w, h)) = reader()
        .map_err(|_| ())
        .and_then(|r| r.into_dimensions().map_err(|_| ()))
    else {
        return Ok(as_is());
    };
    if w.max(h) <= MAX_IMAGE_SIDE {
        return Ok(as_is());
    }
    let decoded = reader()
        .map_err(|source| ScaleError::Read { w, h, source })?
        .decode()
        .map_err(|source| ScaleError::Decode { w, h, source })?;
    let small = decoded.resize(
        MAX_IMAGE_SIDE,
        MAX_IMAGE_SIDE,
        image::imageops::FilterType::Triangle,
    );
    let (nw, nh) = (small.width(), small.height());
    let (mime, bytes) = if image.mime == "image/jpeg" {
        ("image/jpeg", encode_jpeg(&small)?)
    } else {
        let png = encode_png(&small)?;
        if png.len() as u64 > MAX_IMAGE_BYTES {
            ("image/jpeg", encode_jpeg(&small)?)
        } else {
            ("image/png", png)
        }
    };
    Ok(Prepared {
        mime: mime.to_string(),
        size: bytes.len() as u64,
        data_url: data_url(mime, &bytes),
        scaled: Some((w, h, nw, nh)),
    })
}

#[cfg(feature = "images")]
fn encode_png(img: &DynamicImage) -> Result<Vec<u8>, ScaleError> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png)
        .map_err(ScaleError::Encode)?;
    Ok(out.into_inner())
}

#[cfg(feature = "images")]
fn encode_jpeg(img: &DynamicImage) -> Result<Vec<u8>, ScaleError> {
    let mut out = Vec::new();
    let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY);
    DynamicImage::ImageRgb8(img.to_rgb8())
        .write_with_encoder(encoder)
        .map_err(ScaleError::Encode)?;
    Ok(out)
}

/// Without the `images` feature no image can be checked or scaled: every one is refused with
/// [`ScaleError::NotBuilt`] (a clear text for the model, never an unchecked image).
#[cfg(not(feature = "images"))]
pub fn prepare(_image: &LoadedImage) -> Result<Prepared, ScaleError> {
    Err(ScaleError::NotBuilt)
}

/// `data:<mime>;base64,<data>`.
pub fn data_url(mime: &str, bytes: &[u8]) -> String {
    format!(
        "data:{mime};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// Loads and prepares an image (on the blocking pool for the scaling).
pub async fn load_prepared(
    source: &str,
    workspace: &Path,
    cancel: &CancellationToken,
) -> Result<(LoadedImage, Prepared), LoadError> {
    let loaded = load_image(source, workspace, cancel).await?;
    let for_prep = loaded.clone();
    let prepared = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(LoadError::Aborted),
        r = tokio::task::spawn_blocking(move || prepare(&for_prep)) => r,
    };
    match prepared {
        Ok(Ok(p)) => Ok((loaded, p)),
        Ok(Err(e)) => Err(LoadError::Failed(e.to_string())),
        Err(e) => Err(LoadError::Failed(format!(
            "Failed to scale down the image: {e}"
        ))),
    }
}
