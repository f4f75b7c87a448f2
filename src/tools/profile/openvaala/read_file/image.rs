//! The image side of the openvaala read_file: PNG/JPEG/GIF/WebP sniffed by content, at most
//! 20 MB and 8000×8000 px; over `tools.max_image_kb` re-encoded as JPEG and scaled down until it
//! fits. Decoding and encoding use the shared helpers of `image_source`. CPU-bound: runs on the
//! blocking pool with the rest of the call.

#![cfg_attr(not(feature = "images"), allow(dead_code))]

#[cfg(feature = "images")]
use std::io::{Cursor, Read};
use std::os::unix::fs::FileExt;

#[cfg(feature = "images")]
use image::{DynamicImage, ImageReader};

use crate::tools::file_target::Opened;
#[cfg(feature = "images")]
use crate::tools::image_source::data_url;
use crate::tools::image_source::{format_size, sniff_mime};

/// Largest image file read (bytes).
pub(super) const MAX_IMAGE_FILE: u64 = 20 * 1024 * 1024;
/// Largest width and height (px).
pub(super) const MAX_IMAGE_SIDE: u32 = 8000;
const JPEG_QUALITY: u8 = 80;
/// Smallest side the scaling goes down to before giving up on the size limit.
const MIN_SIDE: u32 = 32;

/// An image ready for the model.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LoadedImage {
    pub mime: &'static str,
    pub size: u64,
    pub width: u32,
    pub height: u32,
    pub data_url: String,
    /// `(mime, size, width, height)` sent instead of the original, when it was re-encoded.
    pub reencoded: Option<(&'static str, u64, u32, u32)>,
    pub limit_kb: u64,
}

/// Why an image cannot be sent: the text after `Cannot read image "<path>": `.
#[derive(Debug, thiserror::Error)]
pub(super) enum ImageLoadError {
    /// The file is over [`MAX_IMAGE_FILE`] bytes.
    #[error("{} exceeds the {} limit.", format_size(*.size), format_size(MAX_IMAGE_FILE))]
    TooLarge { size: u64 },
    /// Reading the file or guessing its format failed.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// The content does not decode.
    #[cfg(feature = "images")]
    #[error("it is not a readable image: {0}")]
    Unreadable(#[source] image::ImageError),
    /// A side is over [`MAX_IMAGE_SIDE`] px.
    #[error("{width}×{height} px exceeds the {MAX_IMAGE_SIDE}×{MAX_IMAGE_SIDE} px limit.")]
    TooManyPixels { width: u32, height: u32 },
    /// Re-encoding as JPEG failed.
    #[cfg(feature = "images")]
    #[error("cannot re-encode it: {0}")]
    Reencode(#[source] image::ImageError),
    /// This build cannot decode images (no `images` feature).
    #[cfg(not(feature = "images"))]
    #[error("this build has no image support (rebuild with the `images` feature).")]
    NotBuilt,
}

/// The image type of an opened file by its first bytes, without moving its position.
pub(super) fn sniff(opened: &Opened) -> Option<&'static str> {
    let mut head = [0u8; 16];
    let n = opened.file.read_at(&mut head, 0).ok()?;
    sniff_mime(&head[..n])
}

#[cfg(feature = "images")]
fn encode_jpeg(img: &DynamicImage) -> Result<Vec<u8>, ImageLoadError> {
    let mut out = Vec::new();
    let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY);
    DynamicImage::ImageRgb8(img.to_rgb8())
        .write_with_encoder(encoder)
        .map_err(ImageLoadError::Reencode)?;
    Ok(out)
}

/// Without the `images` feature an image cannot be checked: it is refused, never sent unchecked.
#[cfg(not(feature = "images"))]
pub(super) fn load(
    _opened: Opened,
    _mime: &'static str,
    _limit_kb: u64,
) -> Result<LoadedImage, ImageLoadError> {
    Err(ImageLoadError::NotBuilt)
}

/// Reads, checks and (over `limit_kb`) re-encodes the image of `opened`.
#[cfg(feature = "images")]
pub(super) fn load(
    opened: Opened,
    mime: &'static str,
    limit_kb: u64,
) -> Result<LoadedImage, ImageLoadError> {
    let size = opened.meta.len();
    if size > MAX_IMAGE_FILE {
        return Err(ImageLoadError::TooLarge { size });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    opened
        .file
        .take(MAX_IMAGE_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(ImageLoadError::Io)?;
    let reader = || {
        ImageReader::new(Cursor::new(&bytes))
            .with_guessed_format()
            .map_err(ImageLoadError::Io)
    };
    let (width, height) = reader()?
        .into_dimensions()
        .map_err(ImageLoadError::Unreadable)?;
    if width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
        return Err(ImageLoadError::TooManyPixels { width, height });
    }
    let limit = limit_kb.saturating_mul(1024);
    let size = bytes.len() as u64;
    if size <= limit {
        return Ok(LoadedImage {
            mime,
            size,
            width,
            height,
            data_url: data_url(mime, &bytes),
            reencoded: None,
            limit_kb,
        });
    }
    let decoded = reader()?.decode().map_err(ImageLoadError::Unreadable)?;
    let mut side = width.max(height);
    loop {
        let img = if side >= width.max(height) {
            decoded.clone()
        } else {
            decoded.resize(side, side, image::imageops::FilterType::Triangle)
        };
        let jpeg = encode_jpeg(&img)?;
        let fits = jpeg.len() as u64 <= limit;
        if fits || side <= MIN_SIDE {
            let sent = ("image/jpeg", jpeg.len() as u64, img.width(), img.height());
            return Ok(LoadedImage {
                mime,
                size,
                width,
                height,
                data_url: data_url("image/jpeg", &jpeg),
                reencoded: Some(sent),
                limit_kb,
            });
        }
        side = (side as f64 * 0.75) as u32;
        side = side.max(MIN_SIDE);
    }
}

impl LoadedImage {
    /// The result text of an image sent to the model.
    pub(super) fn summary(&self, path: &str) -> String {
        let head = format!(
            "[image {path}: {}, {}, {}×{} px]",
            self.mime,
            format_size(self.size),
            self.width,
            self.height
        );
        match self.reencoded {
            None => head,
            Some((mime, size, w, h)) => format!(
                "{head}\n[the image is over the {} kB limit: sent re-encoded as {mime}, {w}×{h} px, {} (original size {})]",
                self.limit_kb,
                format_size(size),
                format_size(self.size)
            ),
        }
    }

    /// The result text for a model that takes no images.
    pub(super) fn placeholder(&self, path: &str) -> String {
        format!(
            "[image {path}: {}, {}, {}×{} px — not shown: this model does not accept images]",
            self.mime,
            format_size(self.size),
            self.width,
            self.height
        )
    }
}
