use std::os::unix::fs::symlink;

use super::*;

struct Fixture {
    _root: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
    home: PathBuf,
    rookery: PathBuf,
    tmp: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(root.path()).unwrap();
    let dir = |name: &str| {
        let p = base.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    Fixture {
        ws: dir("ws"),
        home: dir("home"),
        rookery: dir("home/.rookery"),
        tmp: dir("tmp"),
        outside: dir("outside"),
        base,
        _root: root,
    }
}

fn layout(f: &Fixture, policy: &SandboxPolicy) -> SandboxLayout {
    SandboxLayout::resolve(policy, &f.ws, &f.rookery, Some(&f.home), &f.tmp).unwrap()
}

fn policy(mode: SandboxMode) -> SandboxPolicy {
    SandboxPolicy {
        mode,
        ..SandboxPolicy::default()
    }
}

#[test]
fn workspace_write_writes_the_workspace_roots_and_tmpdir_only() {
    let f = fixture();
    std::fs::create_dir_all(f.base.join("extra")).unwrap();
    let mut p = policy(SandboxMode::WorkspaceWrite);
    p.writable_roots.push("../extra".into());
    let l = layout(&f, &p);
    assert_eq!(
        l.writable,
        vec![f.tmp.clone(), f.ws.clone(), f.base.join("extra")]
    );
    assert!(l.may_write(Path::new("new/file.txt")).is_ok());
    assert!(l.may_write(&f.tmp.join("x")).is_ok());
    assert!(l.may_write(&f.base.join("extra/y")).is_ok());
    let e = l.may_write(&f.outside.join("z")).unwrap_err().to_string();
    assert!(e.starts_with("sandbox workspace-write: writing "), "{e}");
    assert!(
        e.contains(&f.outside.join("z").display().to_string()),
        "{e}"
    );
}

#[test]
fn read_only_writes_only_the_tmpdir() {
    let f = fixture();
    let l = layout(&f, &policy(SandboxMode::ReadOnly));
    assert_eq!(l.writable, vec![f.tmp.clone()]);
    let e = l.may_write(Path::new("a.txt")).unwrap_err().to_string();
    assert!(e.starts_with("sandbox read-only: writing "), "{e}");
    assert!(l.may_read(Path::new("a.txt")).is_ok());
    assert!(l.may_write(&f.tmp.join("a")).is_ok());
}

#[test]
fn builtin_and_configured_deny_read_are_refused() {
    let f = fixture();
    std::fs::create_dir_all(f.home.join(".ssh")).unwrap();
    std::fs::create_dir_all(f.ws.join("secrets")).unwrap();
    let mut p = policy(SandboxMode::WorkspaceWrite);
    p.deny_read.push("secrets".into());
    p.deny_read.push("~/private".into());
    let l = layout(&f, &p);
    for d in [".ssh", ".aws", ".gnupg", ".config/gcloud", "private"] {
        assert!(
            l.deny_read.contains(&f.home.join(d)),
            "{d}: {:?}",
            l.deny_read
        );
    }
    assert!(l.deny_read.contains(&f.rookery));
    let e = l
        .may_read(&f.home.join(".ssh/id_ed25519"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("sandbox workspace-write: reading "), "{e}");
    assert!(e.contains(".ssh/id_ed25519"), "{e}");
    assert!(l.may_read(&f.rookery.join("serve.token")).is_err());
    assert!(l.may_read(Path::new("secrets/k")).is_err());
    // A denied path inside a writable root is not writable either.
    assert!(l.may_write(Path::new("secrets/k")).is_err());
    assert!(l.may_read(Path::new("ok.txt")).is_ok());
}

#[test]
fn symlinks_and_dotdot_are_resolved_before_the_check() {
    let f = fixture();
    std::fs::create_dir_all(f.home.join(".ssh")).unwrap();
    std::fs::write(f.home.join(".ssh/key"), "k").unwrap();
    symlink(f.home.join(".ssh"), f.ws.join("keys")).unwrap();
    symlink(&f.outside, f.ws.join("out")).unwrap();
    symlink(f.outside.join("sub"), f.ws.join("dangling")).unwrap();
    let l = layout(&f, &policy(SandboxMode::WorkspaceWrite));
    assert!(l.may_read(Path::new("keys/key")).is_err());
    assert!(l.may_read(Path::new("../home/.ssh/key")).is_err());
    assert!(l.may_read(Path::new("sub/../../home/./.ssh/key")).is_err());
    assert!(l.may_write(Path::new("out/f")).is_err());
    assert!(l.may_write(Path::new("dangling/f")).is_err());
    assert!(l.may_write(Path::new("../outside/f")).is_err());
    // `..` after a symlink leaves from where the link points, as the kernel does.
    std::fs::create_dir_all(f.outside.join("deep")).unwrap();
    symlink(f.outside.join("deep"), f.ws.join("deep")).unwrap();
    assert!(l.may_write(Path::new("deep/../x")).is_err());
    assert!(l.may_write(Path::new("new/../x")).is_ok());
}

#[test]
fn a_file_with_two_links_is_not_overwritten() {
    let f = fixture();
    std::fs::write(f.outside.join("victim"), "v").unwrap();
    std::fs::hard_link(f.outside.join("victim"), f.ws.join("alias")).unwrap();
    std::fs::write(f.ws.join("single"), "s").unwrap();
    let l = layout(&f, &policy(SandboxMode::WorkspaceWrite));
    let e = l.may_overwrite(Path::new("alias")).unwrap_err().to_string();
    assert!(e.contains("2 hard links"), "{e}");
    assert!(l.may_overwrite(Path::new("single")).is_ok());
    assert!(l.may_overwrite(Path::new("missing")).is_ok());
}

#[test]
fn a_missing_writable_root_is_an_error() {
    let f = fixture();
    let mut p = policy(SandboxMode::WorkspaceWrite);
    p.writable_roots.push(f.base.join("nope"));
    let e = SandboxLayout::resolve(&p, &f.ws, &f.rookery, Some(&f.home), &f.tmp).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
}
