//! `read_image`: loads an image (see `image_source`) and hands it to a vision model as a data
//! URL in `ToolResult.images`; the text output is `<mime>, <size>` (plus a note when the image
//! was scaled down and re-encoded).
//!
//! It never calls a model and never builds protocol messages (the close-out attaches images).

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::args::require_nonempty_str;
use super::image_source::{LoadError, Prepared, format_size, load_prepared};
use super::{Tool, ToolContext, ToolResult};
use crate::message::StopReason;

/// The tool's name.
pub const NAME: &str = "read_image";

/// The `read_image` builtin.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadImageTool;

/// `<mime>, <size>` of the loaded image, and what was sent when it was scaled down.
pub fn summary(mime: &str, size: u64, prepared: &Prepared) -> String {
    let head = format!("{mime}, {}", format_size(size));
    match prepared.scaled {
        None => head,
        Some((w, h, nw, nh)) => format!(
            "{head} (scaled down from {w}×{h} to {nw}×{nh} px and re-encoded as {}, {})",
            prepared.mime,
            format_size(prepared.size)
        ),
    }
}

impl Tool for ReadImageTool {
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            let source = match require_nonempty_str(&args, "source", NAME) {
                Ok(s) => s.to_string(),
                Err(e) => {
                    ctx.emit(e.to_string());
                    return ToolResult::failed();
                }
            };
            match load_prepared(&source, &ctx.env.workspace, &ctx.cancel).await {
                Err(LoadError::Aborted) => ToolResult {
                    stop_reason: Some(StopReason::Aborted),
                    ..ToolResult::default()
                },
                Err(LoadError::Failed(text)) => {
                    ctx.emit(text);
                    ToolResult::failed()
                }
                Ok((loaded, prepared)) => {
                    ctx.emit(summary(&loaded.mime, loaded.bytes.len() as u64, &prepared));
                    ToolResult {
                        images: vec![prepared.data_url],
                        ..ToolResult::completed()
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use base64::Engine as _;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::tools::image_source::format_size;
    use crate::tools::profile::penguin::default_definition;

    async fn run(ws: &Path, args: Value, cancel: CancellationToken) -> (String, ToolResult) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let def = Arc::new(default_definition(NAME).unwrap_or_else(|| unreachable!()));
        let ctx = ToolContext::new(ws.to_path_buf(), "c".into(), def, cancel, tx);
        let result = ReadImageTool
            .call(ctx, args.as_object().cloned().unwrap_or_default())
            .await;
        let mut text = String::new();
        while let Ok(piece) = rx.try_recv() {
            text.push_str(&piece);
        }
        (text, result)
    }

    async fn read(ws: &Path, source: &str) -> (String, ToolResult) {
        run(
            ws,
            serde_json::json!({ "source": source }),
            CancellationToken::new(),
        )
        .await
    }

    fn encoded(img: &image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    fn decode_data_url(url: &str) -> image::DynamicImage {
        let (_, b64) = url.split_once(";base64,").unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        image::load_from_memory(&bytes).unwrap()
    }

    #[test]
    fn sizes_are_formatted_like_the_reference() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1024), "1.0 kB");
        assert_eq!(format_size(126_362), "123.4 kB");
        assert_eq!(format_size(5 * 1024 * 1024), "5.0 MB");
    }

    #[tokio::test]
    async fn small_images_are_attached_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let img = image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(
            3,
            2,
            image::Rgb([1, 2, 3]),
        ));
        let png = encoded(&img, image::ImageFormat::Png);
        std::fs::write(dir.path().join("a.png"), &png).unwrap();
        let gif = encoded(&img, image::ImageFormat::Gif);
        // Sniffed by content: the extension does not matter.
        std::fs::write(dir.path().join("really-a-gif.png"), &gif).unwrap();
        let (text, result) = read(dir.path(), "a.png").await;
        assert_eq!(text, format!("image/png, {} B", png.len()));
        let url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&png)
        );
        assert_eq!(
            result,
            ToolResult {
                images: vec![url],
                ..ToolResult::completed()
            }
        );
        let abs = dir.path().join("really-a-gif.png");
        let (text, result) = read(Path::new("/"), abs.to_str().unwrap()).await;
        assert_eq!(text, format!("image/gif, {} B", gif.len()));
        assert!(result.images[0].starts_with("data:image/gif;base64,R0lGOD"));
    }

    #[tokio::test]
    async fn large_images_are_scaled_down_and_re_encoded() {
        let dir = tempfile::tempdir().unwrap();
        let wide = image::DynamicImage::ImageRgba8(image::RgbaImage::from_pixel(
            2500,
            40,
            image::Rgba([9, 9, 9, 255]),
        ));
        let png = encoded(&wide, image::ImageFormat::Png);
        std::fs::write(dir.path().join("wide.png"), &png).unwrap();
        let (text, result) = read(dir.path(), "wide.png").await;
        let sent = decode_data_url(&result.images[0]);
        assert_eq!((sent.width(), sent.height()), (2000, 32));
        let prefix = format!(
            "image/png, {} (scaled down from 2500×40 to 2000×32 px and re-encoded as image/png, ",
            format_size(png.len() as u64)
        );
        assert!(text.starts_with(&prefix) && text.ends_with(')'), "{text}");
        assert!(result.images[0].starts_with("data:image/png;base64,"));

        let tall = image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(
            30,
            3000,
            image::Rgb([200, 0, 0]),
        ));
        std::fs::write(
            dir.path().join("tall.jpg"),
            encoded(&tall, image::ImageFormat::Jpeg),
        )
        .unwrap();
        let (text, result) = read(dir.path(), "tall.jpg").await;
        assert!(
            text.contains("(scaled down from 30×3000 to 20×2000 px and re-encoded as image/jpeg, "),
            "{text}"
        );
        assert!(result.images[0].starts_with("data:image/jpeg;base64,"));
        let sent = decode_data_url(&result.images[0]);
        assert_eq!((sent.width(), sent.height()), (20, 2000));
    }

    #[tokio::test]
    async fn every_failure_has_the_reference_text() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("big.png"), vec![0u8; 5 * 1024 * 1024 + 1]).unwrap();
        std::fs::write(ws.join("notes.txt"), "hello").unwrap();
        std::fs::write(ws.join("pic.bmp"), b"BM\x00\x00\x00\x00").unwrap();
        std::fs::write(ws.join("empty.png"), b"").unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        let cases = [
            (
                "big.png",
                "Image too large: 5.0 MB exceeds the 5.0 MB limit.",
            ),
            (
                "notes.txt",
                "Unsupported image type: only png, jpeg, gif and webp are supported.",
            ),
            (
                "pic.bmp",
                "Unsupported image type: only png, jpeg, gif and webp are supported.",
            ),
            ("empty.png", "Image \"empty.png\" is empty."),
            ("sub", "Failed to read image \"sub\": path is not a file."),
            (
                "nope.png",
                "Failed to read image \"nope.png\": No such file or directory (os error 2)",
            ),
        ];
        for (source, expected) in cases {
            let (text, result) = read(ws, source).await;
            assert_eq!(text, expected, "{source}");
            assert_eq!(result, ToolResult::failed(), "{source}");
        }
        let (text, result) = run(ws, serde_json::json!({}), CancellationToken::new()).await;
        assert_eq!(text, "Missing required argument \"source\" for read_image.");
        assert_eq!(result, ToolResult::failed());
        let cancel = CancellationToken::new();
        cancel.cancel();
        let (text, result) = run(ws, serde_json::json!({"source": "notes.txt"}), cancel).await;
        assert_eq!(text, "");
        assert_eq!(result.stop_reason, Some(StopReason::Aborted));
    }
}
