//! Where the config files are: the user file (`$XDG_CONFIG_HOME/rookery/config.yaml`, else
//! `$HOME/.config/rookery/config.yaml`) and the project file (`.rookery/config.yaml` in the
//! workspace or, inside a repository, the nearest parent up to the repository root: the first
//! directory holding `.git`; without a repository, the workspace only). And whether discovery
//! is off (`--no-config-discovery`, `ROOKERY_NO_CONFIG`).
//!
//! It computes paths from the environment it is given and asks the file system what exists;
//! it never reads or parses a config file.

use std::path::{Path, PathBuf};

/// The variable that turns discovery off (set and neither empty nor `0`).
pub const NO_CONFIG_ENV: &str = "ROOKERY_NO_CONFIG";

/// The folder of the project file, and of the user file under `$XDG_CONFIG_HOME`.
pub const PROJECT_DIR: &str = ".rookery";

/// The name of both config files.
pub const FILE_NAME: &str = "config.yaml";

/// Whether `ROOKERY_NO_CONFIG` turns discovery off.
pub fn disabled_by_env(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env(NO_CONFIG_ENV).is_some_and(|v| {
        let v = v.trim();
        !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false")
    })
}

/// The user file's path (whether or not it exists): `$XDG_CONFIG_HOME/rookery/config.yaml`
/// when that variable holds an absolute path (the XDG rule: a relative one is ignored), else
/// `$HOME/.config/rookery/config.yaml`; `None` without either.
pub fn user_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let absolute = |name: &str| {
        env(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base =
        absolute("XDG_CONFIG_HOME").or_else(|| absolute("HOME").map(|h| h.join(".config")))?;
    Some(base.join("rookery").join(FILE_NAME))
}

/// The repository root of `dir`: the nearest of `dir` and its parents that holds `.git` (a
/// directory, or the file of a worktree).
pub fn repository_root(dir: &Path) -> Option<&Path> {
    dir.ancestors().find(|d| d.join(".git").exists())
}

/// The project file of `workspace`: the nearest `.rookery/config.yaml` from the workspace up
/// to its repository root (the workspace only outside a repository). `skip` is a directory
/// whose `.rookery` is not a project's (the Rookery home, `~/.rookery`, holds traces).
pub fn project_file(workspace: &Path, skip: Option<&Path>) -> Option<PathBuf> {
    let workspace = std::path::absolute(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let last = repository_root(&workspace)
        .unwrap_or(&workspace)
        .to_path_buf();
    for dir in workspace.ancestors() {
        let folder = dir.join(PROJECT_DIR);
        let file = folder.join(FILE_NAME);
        if skip != Some(folder.as_path()) && file.is_file() {
            return Some(file);
        }
        if dir == last {
            break;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_user_file_follows_xdg_then_home() {
        let both = env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(
            user_file(&both),
            Some(PathBuf::from("/x/rookery/config.yaml"))
        );
        let relative = env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")]);
        assert_eq!(
            user_file(&relative),
            Some(PathBuf::from("/h/.config/rookery/config.yaml"))
        );
        assert_eq!(user_file(&env(&[])), None);
    }

    #[test]
    fn no_config_is_any_value_but_empty_zero_or_false() {
        assert!(disabled_by_env(&env(&[("ROOKERY_NO_CONFIG", "1")])));
        assert!(disabled_by_env(&env(&[("ROOKERY_NO_CONFIG", "yes")])));
        for off in ["", "0", "false"] {
            let vars: &'static [(&str, &str)] = match off {
                "" => &[("ROOKERY_NO_CONFIG", "")],
                "0" => &[("ROOKERY_NO_CONFIG", "0")],
                _ => &[("ROOKERY_NO_CONFIG", "false")],
            };
            assert!(!disabled_by_env(&env(vars)), "{off:?}");
        }
    }

    #[test]
    fn the_project_file_is_searched_up_to_the_repository_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let outer = dir.path();
        let repo = outer.join("repo");
        let ws = repo.join("a/b");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(outer.join(".rookery")).unwrap();
        std::fs::write(outer.join(".rookery/config.yaml"), "").unwrap();
        // No repository: the workspace only.
        assert_eq!(project_file(&ws, None), None);
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        // Above the root: not seen.
        assert_eq!(project_file(&ws, None), None);
        std::fs::create_dir_all(repo.join("a/.rookery")).unwrap();
        std::fs::write(repo.join("a/.rookery/config.yaml"), "").unwrap();
        assert_eq!(
            project_file(&ws, None),
            Some(repo.join("a/.rookery/config.yaml"))
        );
        assert_eq!(project_file(&ws, Some(&repo.join("a/.rookery"))), None);
    }
}
