//! The layering of `src/`, checked from the code: `docs/architecture.md` ("Layers") declares the
//! order of the areas (the top-level modules), and this test reads every `crate::…`, `super::…`
//! and `self::…` path of every file under `src/` (tests included) and fails
//! - on an import from a lower area into a higher one, and
//! - on a cycle between the modules of one folder that passes through a sub-folder (`foo.rs`
//!   with `foo/` counting as one module; files of one folder may import each other both ways),
//!
//! naming the file and line of each offending import (every such cycle, in every folder). There
//! is no exception list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One module of the library: its path from the crate root and its file.
struct Module {
    path: Vec<String>,
    file: PathBuf,
}

/// `mod name;` declarations of `text`, each with the file a `#[path = "…"]` before it names.
fn declared_modules(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut path_attr = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("#[path = \"") {
            path_attr = rest.split('"').next().map(str::to_string);
            continue;
        }
        let decl = line
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ");
        if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            out.push((name.trim().to_string(), path_attr.take()));
        } else if !line.starts_with("#[") && !line.is_empty() {
            path_attr = None;
        }
    }
    out
}

/// Every module file of the library, found from `src/lib.rs` as rustc finds them.
fn modules() -> Vec<Module> {
    let src = repo().join("src");
    let mut out = Vec::new();
    let mut todo = vec![(Vec::<String>::new(), src.join("lib.rs"))];
    while let Some((path, file)) = todo.pop() {
        let text = std::fs::read_to_string(&file).expect("module file");
        // `foo.rs` keeps its children in `foo/`; the root and `mod.rs` in their own folder.
        let child_dir = if path.is_empty() {
            src.clone()
        } else {
            file.with_extension("")
        };
        for (name, attr) in declared_modules(&text) {
            let child = match attr {
                Some(p) => file.parent().expect("parent").join(p),
                None => child_dir.join(format!("{name}.rs")),
            };
            if child.exists() {
                let mut child_path = path.clone();
                child_path.push(name);
                todo.push((child_path, child));
            }
        }
        out.push(Module { path, file });
    }
    out
}

/// The paths a `use` tree names, braces expanded: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, …
fn expand_use(tree: &str) -> Vec<String> {
    // `x as y` names `x`.
    let mut plain = tree.to_string();
    while let Some(at) = plain.find(" as ") {
        let rest = &plain[at + 4..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        plain.replace_range(at..at + 4 + end, "");
    }
    let tree: String = plain.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let prefix = &tree[..open];
    let close = tree.rfind('}').unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| {
            expand_use(p)
                .into_iter()
                .map(move |s| format!("{prefix}{s}"))
        })
        .collect()
}

/// The module paths a file refers to, each with its line: `use` trees and inline paths that
/// start with `crate::`, `super::` or `self::`, resolved against the module the line is in
/// (an inline `mod name { … }` is one level deeper).
fn references(module: &Module) -> Vec<(Vec<String>, usize)> {
    let text = std::fs::read_to_string(&module.file).expect("module file");
    let mut out = Vec::new();
    let mut inline: Vec<(String, i64)> = Vec::new();
    let mut depth: i64 = 0;
    let mut pending_use: Option<(String, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split("//").next().unwrap_or("");
        let trimmed = line.trim();
        let here: Vec<String> = module
            .path
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        let decl = trimmed
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(" {")) {
            inline.push((name.trim().to_string(), depth));
        }
        // A `use` statement, possibly over several lines.
        let mut paths = Vec::new();
        let use_start = trimmed
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ")
            .strip_prefix("use ");
        match (&mut pending_use, use_start) {
            (Some((acc, _)), _) => acc.push_str(trimmed),
            (None, Some(rest)) => pending_use = Some((rest.to_string(), i + 1)),
            (None, None) => {}
        }
        if let Some((acc, at)) = &pending_use
            && acc.ends_with(';')
        {
            for p in expand_use(acc.trim_end_matches(';')) {
                paths.push((p, *at));
            }
            pending_use = None;
        } else if pending_use.is_none() {
            for start in ["crate::", "super::"] {
                let mut rest = line;
                while let Some(pos) = rest.find(start) {
                    let before = rest[..pos].chars().last();
                    let tail = &rest[pos..];
                    let end = tail
                        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .unwrap_or(tail.len());
                    if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                        paths.push((tail[..end].to_string(), i + 1));
                    }
                    rest = &tail[end.max(1)..];
                }
            }
        }
        for (p, at) in paths {
            if let Some(resolved) = resolve(&here, &p) {
                out.push((resolved, at));
            }
        }
        depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
        while inline.last().is_some_and(|(_, d)| depth <= *d) {
            inline.pop();
        }
    }
    out
}

/// `path` (as written in module `here`) from the crate root; `None` for paths outside the crate.
fn resolve(here: &[String], path: &str) -> Option<Vec<String>> {
    let mut parts = path.split("::").filter(|s| !s.is_empty());
    let mut out: Vec<String> = match parts.next()? {
        "crate" => Vec::new(),
        "self" => here.to_vec(),
        "super" => here[..here.len().checked_sub(1)?].to_vec(),
        _ => return None,
    };
    for part in parts {
        match part {
            "super" => {
                out.pop()?;
            }
            "self" | "*" => {}
            p => out.push(p.to_string()),
        }
    }
    Some(out)
}

/// The areas in their declared order, top first, from `docs/architecture.md`'s "Layers".
fn declared_order() -> Vec<String> {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).expect("architecture");
    let section = doc
        .split("\n## Layers")
        .nth(1)
        .expect("docs/architecture.md has a \"Layers\" section");
    let line = section
        .lines()
        .find(|l| l.contains(" → "))
        .expect("a line `a → b → …` in \"Layers\"");
    line.split('→')
        .map(|s| s.trim().trim_matches('`').to_string())
        .collect()
}

/// A shortest cycle in `edges` that passes through `node`, as the list of its nodes from
/// `node` back to `node`; `None` when `node` is on no cycle.
fn cycle_through(node: &str, edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([node.to_string()]);
    while let Some(n) = queue.pop_front() {
        for m in edges.get(&n).into_iter().flatten() {
            if m == node {
                // Back from `n` to `node` through the steps that reached it.
                let mut path = vec![node.to_string(), n.clone()];
                let mut at = n.clone();
                while let Some(prev) = came_from.get(&at) {
                    path.push(prev.clone());
                    at = prev.clone();
                }
                path.reverse();
                return Some(path);
            }
            if !came_from.contains_key(m) {
                came_from.insert(m.clone(), n.clone());
                queue.push_back(m.clone());
            }
        }
    }
    None
}

fn rel(file: &Path) -> String {
    file.strip_prefix(repo())
        .unwrap_or(file)
        .display()
        .to_string()
}

/// The steps of a cycle, as a set: the same cycle found from two of its folders is one.
type Steps = BTreeSet<(String, String)>;

/// The violations of the layering: upward imports between areas and cycles through a
/// sub-folder between the modules of one folder.
fn violations() -> Vec<String> {
    let modules = modules();
    let known: BTreeSet<Vec<String>> = modules.iter().map(|m| m.path.clone()).collect();
    let order = declared_order();
    let rank = |area: &str| order.iter().position(|a| a == area);
    let mut out = Vec::new();
    // Per folder (the parent's path), the edges between its modules, with one example each.
    let mut folders: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut example: BTreeMap<(Vec<String>, String, String), String> = BTreeMap::new();
    for module in &modules {
        if module.path.is_empty() {
            continue;
        }
        for (mut target, line) in references(module) {
            while !target.is_empty() && !known.contains(&target) {
                target.pop();
            }
            let from_area = &module.path[0];
            if let Some(to_area) = target.first()
                && to_area != from_area
            {
                match (rank(from_area), rank(to_area)) {
                    (Some(f), Some(t)) if t < f => out.push(format!(
                        "{}:{line}: `{from_area}` imports `{to_area}`, an area above it",
                        rel(&module.file)
                    )),
                    (None, _) | (_, None) => out.push(format!(
                        "{}:{line}: `{from_area}` → `{to_area}`: an area missing from the \
                         order in docs/architecture.md, \"Layers\"",
                        rel(&module.file)
                    )),
                    _ => {}
                }
            }
            let common = module
                .path
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common < module.path.len() && common < target.len() {
                let (a, b) = (module.path[common].clone(), target[common].clone());
                let folder = module.path[..common].to_vec();
                example
                    .entry((folder.clone(), a.clone(), b.clone()))
                    .or_insert_with(|| format!("{}:{line}", rel(&module.file)));
                folders
                    .entry(folder)
                    .or_default()
                    .entry(a)
                    .or_default()
                    .insert(b);
            }
        }
    }
    // The sibling modules that are folders themselves (`foo.rs` with `foo/`): no cycle may pass
    // through one. Files of one folder may import each other both ways.
    let is_folder = |path: &[String]| {
        known
            .iter()
            .any(|k| k.len() == path.len() + 1 && k.starts_with(path))
    };
    // Every unit that is a folder and lies on a cycle is reported (a cycle through several
    // folders once, from the first of them).
    let mut seen: BTreeSet<(Vec<String>, Steps)> = BTreeSet::new();
    for (folder, edges) in &folders {
        for unit in edges.keys() {
            let mut path = folder.clone();
            path.push(unit.clone());
            if !is_folder(&path) {
                continue;
            }
            let Some(cycle) = cycle_through(unit, edges) else {
                continue;
            };
            let steps: Steps = cycle
                .windows(2)
                .map(|w| (w[0].clone(), w[1].clone()))
                .collect();
            if !seen.insert((folder.clone(), steps)) {
                continue;
            }
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    let at = &example[&(folder.clone(), w[0].clone(), w[1].clone())];
                    format!("{} → {} ({at})", w[0], w[1])
                })
                .collect();
            out.push(format!(
                "a cycle through a folder between the modules of src/{}: {}",
                folder.join("/"),
                steps.join(", ")
            ));
        }
    }
    out
}

#[test]
fn no_area_imports_upward_and_no_folder_has_a_cycle() {
    let found = violations();
    assert!(
        found.is_empty(),
        "the layering of src/ (docs/architecture.md, \"Layers\") is broken:\n{}",
        found.join("\n")
    );
}

#[test]
fn use_trees_and_relative_paths_resolve() {
    assert_eq!(
        expand_use("crate::a::{b::C, d::{e, f as g}}"),
        ["crate::a::b::C", "crate::a::d::e", "crate::a::d::f"]
    );
    let here = ["x".to_string(), "y".to_string()];
    assert_eq!(
        resolve(&here, "super::z::T"),
        Some(vec!["x".into(), "z".into(), "T".into()])
    );
    assert_eq!(
        resolve(&here, "self::w"),
        Some(vec!["x".into(), "y".into(), "w".into()])
    );
    assert_eq!(resolve(&here, "crate::q"), Some(vec!["q".into()]));
    assert_eq!(resolve(&here, "std::io"), None);
}

#[test]
fn cycle_through_finds_a_shortest_cycle() {
    let mut edges = BTreeMap::new();
    edges.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    edges.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    edges.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(
        cycle_through("a", &edges),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(
        cycle_through("b", &edges),
        Some(vec!["b".into(), "c".into(), "a".into(), "b".into()])
    );
    edges.remove("c");
    assert_eq!(cycle_through("a", &edges), None);
}
