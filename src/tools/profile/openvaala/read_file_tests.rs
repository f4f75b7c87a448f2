//! Tests of the openvaala `read_file` ([`VaalaReadFile`]) called as the profile defines it
//! (`openvaala_definition("read_file")`): images, secret stores, symlinks and `AGENTS.md`. They
//! sit beside the tool and its definition, so the tool's own tests need no definition.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::read_file::{VaalaReadFile, agents};
use crate::tools::session_scope::SessionScope;
use crate::tools::{Tool, ToolContext, ToolResult};

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// A PNG of random pixels (it does not compress) of `side`×`side` px.
fn noisy_png(path: &Path, side: u32) {
    let img = ::image::RgbImage::from_fn(side, side, |_, _| {
        ::image::Rgb([rand::random(), rand::random(), rand::random()])
    });
    img.save_with_format(path, ::image::ImageFormat::Png)
        .unwrap();
}

async fn call(tool: VaalaReadFile, ws: &Path, args: Value) -> (ToolResult, String) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let def = super::openvaala_definition("read_file").unwrap();
    let ctx = ToolContext::new(
        ws.to_path_buf(),
        "c1".into(),
        std::sync::Arc::new(def),
        tokio_util::sync::CancellationToken::new(),
        tx,
    );
    let result = tool.call(ctx, obj(args)).await;
    let mut text = String::new();
    while let Ok(t) = rx.try_recv() {
        text.push_str(&t);
    }
    (result, text)
}

#[tokio::test]
async fn images_over_the_limit_are_reencoded_as_jpeg() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    // Named .txt: the type comes from the content.
    noisy_png(&dir.path().join("big.txt"), 400);
    let original = std::fs::metadata(dir.path().join("big.txt")).unwrap().len();
    assert!(original > 100 * 1024);
    let (result, text) = call(
        VaalaReadFile::new(true, 100),
        dir.path(),
        json!({"path": "big.txt"}),
    )
    .await;
    assert_eq!(result.stop_reason, None, "{text}");
    assert_eq!(result.images.len(), 1);
    let url = &result.images[0];
    let b64 = url.strip_prefix("data:image/jpeg;base64,").unwrap();
    let jpeg = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    assert!(jpeg.len() <= 100 * 1024, "{}", jpeg.len());
    assert!(text.starts_with("[image big.txt: image/png, "), "{text}");
    assert!(
        text.contains("over the 100 kB limit: sent re-encoded as image/jpeg"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "(original size {})",
            crate::tools::image_source::format_size(original)
        )),
        "{text}"
    );

    // Under the limit it goes as it is; a text-only model gets a placeholder.
    noisy_png(&dir.path().join("small.png"), 16);
    let (result, text) = call(
        VaalaReadFile::new(true, 500),
        dir.path(),
        json!({"path": "small.png"}),
    )
    .await;
    assert!(result.images[0].starts_with("data:image/png;base64,"));
    assert!(!text.contains("re-encoded"), "{text}");
    let (result, text) = call(
        VaalaReadFile::new(false, 500),
        dir.path(),
        json!({"path": "small.png"}),
    )
    .await;
    assert!(result.images.is_empty());
    assert!(
        text.ends_with("16×16 px — not shown: this model does not accept images]"),
        "{text}"
    );
}

/// The text-only tool's call of `path` in `ws`.
async fn read(ws: &Path, path: &str) -> (ToolResult, String) {
    call(VaalaReadFile::new(false, 500), ws, json!({"path": path})).await
}

#[tokio::test]
async fn secret_stores_are_refused_by_name_symlink_and_hard_link_and_never_brought() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join(".vault.toml"), "api_key = \"sk-vault\"\n").unwrap();
    std::fs::write(ws.join(".Project_Config.TOML"), "token = \"sk-project\"\n").unwrap();
    std::os::unix::fs::symlink(".vault.toml", ws.join("notes.txt")).unwrap();
    std::fs::hard_link(ws.join(".vault.toml"), ws.join("copy.txt")).unwrap();
    let refused = |path: &str, name: &str| {
        format!(
            "Refusing to read \"{path}\": {name} holds the user's secrets and must never enter the conversation."
        )
    };
    for (path, name) in [
        (".vault.toml", ".vault.toml"),
        (".Project_Config.TOML", ".project_config.toml"),
        ("notes.txt", ".vault.toml"),
        ("copy.txt", ".vault.toml"),
    ] {
        let (result, text) = read(ws, path).await;
        assert_eq!(text, refused(path, name), "{path}");
        assert_eq!(
            result.stop_reason,
            Some(crate::message::StopReason::Failed),
            "{path}"
        );
    }

    // An AGENTS.md that is a secret store (by a symlink or a hard link) is not brought along;
    // a plain one next to it still is.
    std::fs::create_dir_all(ws.join("a/b")).unwrap();
    std::os::unix::fs::symlink("../../.vault.toml", ws.join("a/AGENTS.md")).unwrap();
    std::fs::hard_link(ws.join(".vault.toml"), ws.join("AGENTS.md")).unwrap();
    std::fs::write(ws.join("a/b/AGENTS.md"), "inner rules\n").unwrap();
    std::fs::write(ws.join("a/b/f.txt"), "x\n").unwrap();
    let (_, text) = read(ws, "a/b/f.txt").await;
    assert!(!text.contains("sk-vault"), "{text}");
    assert!(
        text.ends_with(
            "<project_instructions path=\"a/b/AGENTS.md\">\ninner rules\n</project_instructions>"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_symlink_does_not_lead_out_of_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, out) = (dir.path().join("ws"), dir.path().join("out"));
    std::fs::create_dir_all(ws.join("a")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("o.txt"), "outside\n").unwrap();
    std::fs::write(out.join("AGENTS.md"), "outside rules\n").unwrap();
    std::fs::write(ws.join("a/in.txt"), "inside\n").unwrap();
    std::os::unix::fs::symlink(&out, ws.join("up")).unwrap();
    std::os::unix::fs::symlink(out.join("o.txt"), ws.join("o-link.txt")).unwrap();
    std::os::unix::fs::symlink("a/in.txt", ws.join("in-link.txt")).unwrap();
    for path in ["up/o.txt", "o-link.txt"] {
        let (result, text) = read(&ws, path).await;
        assert_eq!(
            text,
            format!("Path \"{path}\" is outside the workspace {}.", ws.display())
        );
        assert_eq!(result.stop_reason, Some(crate::message::StopReason::Failed));
    }
    // A symlink that stays inside is followed.
    let (_, text) = read(&ws, "in-link.txt").await;
    assert_eq!(text, "     1\tinside");
    // An AGENTS.md leading out is not brought along.
    std::os::unix::fs::symlink(out.join("AGENTS.md"), ws.join("a/AGENTS.md")).unwrap();
    let (_, text) = read(&ws, "a/in.txt").await;
    assert_eq!(text, "     1\tinside");
}

/// `dir/ws` (its files: `a.txt`, `out -> dir/out`) and `dir/wslink -> ws`, canonical.
fn symlinked_workspace(dir: &Path) -> (PathBuf, PathBuf) {
    let root = std::fs::canonicalize(dir).unwrap();
    let (ws, link) = (root.join("ws"), root.join("wslink"));
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "hi\n").unwrap();
    std::fs::write(root.join("out/o.txt"), "outside\n").unwrap();
    std::os::unix::fs::symlink(root.join("out"), ws.join("out")).unwrap();
    std::os::unix::fs::symlink("ws", &link).unwrap();
    (ws, link)
}

#[tokio::test]
async fn absolute_paths_may_name_the_workspace_through_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, link) = symlinked_workspace(dir.path());
    // The workspace as a session holds it (canonical) or as given (the link): either name
    // of it reaches its files.
    for (given, other) in [(&ws, &link), (&link, &ws)] {
        for path in [given.join("a.txt"), other.join("a.txt")] {
            let (result, text) = read(given, &path.display().to_string()).await;
            assert_eq!(text, "     1\thi", "{}", path.display());
            assert_eq!(result.stop_reason, None);
        }
        // Still refused: a path whose real location leaves it, missing or not (the error
        // names the workspace as given), and one that never goes through it.
        let outside = |p: &Path| {
            let p = p.display().to_string();
            format!("Path \"{p}\" is outside the workspace {}.", given.display())
        };
        for path in [
            other.join("out/o.txt"),
            other.join("out/missing.txt"),
            given.join("out/missing.txt"),
            dir.path().join("out/o.txt"),
        ] {
            let (_, text) = read(given, &path.display().to_string()).await;
            assert_eq!(text, outside(&path));
        }
    }
}

#[tokio::test]
async fn agents_md_is_known_by_its_real_location_and_must_be_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/AGENTS.md"), "sub rules\n").unwrap();
    std::fs::write(ws.join("sub/f.txt"), "x\n").unwrap();
    std::os::unix::fs::symlink("sub", ws.join("sublink")).unwrap();
    let brought =
        "<project_instructions path=\"sub/AGENTS.md\">\nsub rules\n</project_instructions>";
    let scope = SessionScope::new();
    assert_eq!(agents::bring(&ws, &ws.join("sub/f.txt"), &scope), brought);
    // The same file met again through a symlinked directory is not brought again.
    assert_eq!(agents::bring(&ws, &ws.join("sublink/f.txt"), &scope), "");
    // Reading it through the link counts as meeting it.
    let scope = SessionScope::new();
    assert_eq!(
        agents::bring(&ws, &ws.join("sublink/AGENTS.md"), &scope),
        ""
    );
    assert_eq!(agents::bring(&ws, &ws.join("sub/f.txt"), &scope), "");

    // One that is not UTF-8 text (read_file refuses it) is not brought, until it is fixed.
    std::fs::write(ws.join("sub/AGENTS.md"), b"rules \xff\xfe\n").unwrap();
    let (_, text) = read(&ws, "sub/AGENTS.md").await;
    assert!(text.contains("not UTF-8"), "{text}");
    let scope = SessionScope::new();
    assert_eq!(agents::bring(&ws, &ws.join("sub/f.txt"), &scope), "");
    std::fs::write(ws.join("sub/AGENTS.md"), "sub rules\n").unwrap();
    assert_eq!(agents::bring(&ws, &ws.join("sub/f.txt"), &scope), brought);
    // A character cut by the 64 KB limit is left out, not taken for invalid bytes.
    let long = format!("a{}", "é".repeat(40_000));
    std::fs::write(ws.join("sub/AGENTS.md"), &long).unwrap();
    let text = agents::bring(&ws, &ws.join("sub/f.txt"), &SessionScope::new());
    let kept = format!("a{}", "é".repeat(32_767));
    assert!(text.contains(&format!("\n{kept}\n</")), "{}", text.len());
}
