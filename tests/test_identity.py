"""identity.py on real git repositories: which project a folder is, without a daemon (issue #32)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from engram_core.identity import identity_of, normalise_remote


def git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True
    )


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:acme/widget.git",
        "ssh://git@GitHub.com:22/acme/widget",
        "https://user@github.com/acme/widget/",
        "https://github.com/acme/widget.git",
        "git://github.com/acme/widget",
    ],
)
def test_one_spelling_per_remote(url: str) -> None:
    assert normalise_remote(url) == "github.com/acme/widget"


def test_other_repositories_stay_apart() -> None:
    assert normalise_remote("git@github.com:acme/widget2.git") != normalise_remote(
        "git@github.com:acme/widget"
    )
    assert normalise_remote("git@gitlab.com:acme/widget.git") != normalise_remote(
        "git@github.com:acme/widget"
    )


def test_local_remotes_are_real_paths(tmp_path: Path) -> None:
    (tmp_path / "r.git").mkdir()
    assert normalise_remote(f"file://{tmp_path}/r.git") == normalise_remote(
        str(tmp_path / "x" / ".." / "r.git")
    )


def test_a_worktree_of_a_repository_without_remote_is_its_root_commit(tmp_path: Path) -> None:
    main = tmp_path / "main"
    git("init", "-q", str(main))
    (main / "f").write_text("x")
    git("add", ".", cwd=main)
    git("commit", "-q", "-m", "x", cwd=main)
    git("worktree", "add", "-q", "-b", "b", str(tmp_path / "tree"), cwd=main)
    one, two = identity_of(main), identity_of(tmp_path / "tree")
    assert one.kind == two.kind == "root-commit" and one.key == two.key and one.git_dir == two.git_dir
    assert one.root != two.root  # each keeps its own working tree (its settings file lives there)
    other = tmp_path / "other"
    git("init", "-q", str(other))
    (other / "f").write_text("x")
    git("add", ".", cwd=other)
    git("commit", "-q", "-m", "another history", cwd=other)
    assert identity_of(other).key != one.key


def test_no_repository_or_no_commit_is_a_folder(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    (marker / ".git").mkdir(parents=True)
    empty = tmp_path / "empty"
    git("init", "-q", str(empty))
    for folder in (marker, empty, tmp_path):
        ident = identity_of(folder)
        assert ident.kind == "folder" and not ident.shared
        assert ident.store_dir(tmp_path / "home") == folder.resolve() / ".claude" / "engram"
