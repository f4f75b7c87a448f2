//! `docs/architecture.md` maps every folder of `src/`: each folder under `src/` must be named as
//! `` `src/<folder>/` `` in the first column of a row of its "Where things live" table, so a
//! newcomer finds any module's place in one look. A folder added without its row fails here,
//! named.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every folder below `dir`, as a path relative to the repository (`src/tools/apply_patch`).
fn folders(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_dir() {
            let path = entry.path();
            let rel = path.strip_prefix(repo()).expect("inside the repository");
            out.push(rel.to_string_lossy().into_owned());
            folders(&path, out);
        }
    }
}

/// The first cells of the rows of the map's table.
fn mapped_cells(architecture: &str) -> Vec<String> {
    let section = architecture
        .split("\n## Where things live")
        .nth(1)
        .expect("docs/architecture.md has a \"Where things live\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter(|line| line.starts_with("| `"))
        .filter_map(|line| line.split('|').nth(1).map(str::to_string))
        .collect()
}

/// The folders of `src` that no first cell names.
fn unmapped(src_folders: &[String], cells: &[String]) -> Vec<String> {
    src_folders
        .iter()
        .filter(|folder| {
            let named = format!("`{folder}/`");
            !cells.iter().any(|cell| cell.contains(&named))
        })
        .cloned()
        .collect()
}

#[test]
fn every_src_folder_has_its_row_in_the_architecture_map() {
    let mut src_folders = Vec::new();
    folders(&repo().join("src"), &mut src_folders);
    src_folders.sort();
    assert!(
        src_folders.len() > 10,
        "expected the folders of src/, found {src_folders:?}"
    );
    let architecture =
        std::fs::read_to_string(repo().join("docs/architecture.md")).expect("docs/architecture.md");
    let missing = unmapped(&src_folders, &mapped_cells(&architecture));
    assert!(
        missing.is_empty(),
        "docs/architecture.md, \"Where things live\": no row names these folders of src/ as \
         `src/<folder>/` in its first column: {missing:?}"
    );
}

#[test]
fn a_folder_named_only_in_a_description_is_not_mapped() {
    let map = "intro\n## Where things live\n\n| path | contents |\n|---|---|\n\
               | `src/a.rs`, `src/a/` | see also `src/b/` |\n\n## Next\n| `src/c/` | x |\n";
    let cells = mapped_cells(map);
    let folders = [
        "src/a".to_string(),
        "src/b".to_string(),
        "src/c".to_string(),
    ];
    assert_eq!(unmapped(&folders, &cells), ["src/b", "src/c"]);
}
