"""Where azdl finds the user's project (azdl/project.py) and what `azdl init` refuses: bad input
gets one error line naming what was given and what is expected, before anything is written."""

import pytest

from azdl.cli import main
from azdl.envs import PACKAGES_ROOT


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_the_project_is_the_nearest_folder_up_with_a_pulumi_yaml(tmp_path, monkeypatch, capsys):
    (tmp_path / "Pulumi.yaml").write_text("name: azdl\nruntime: python\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    assert main(["policy", "qa"]) == 2
    assert f"known stacks ({tmp_path}/stacks): none" in error_line(capsys)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("missing", "--project-dir {d}/missing: no such folder; expected the folder that holds"),
        ("file", "--project-dir {d}/file: a file; expected the folder that holds"),
        ("empty", "--project-dir {d}/empty has no Pulumi.yaml; expected a project's folder"),
    ],
)
def test_a_project_dir_that_is_no_project_is_one_error_line(tmp_path, capsys, given, expected):
    (tmp_path / "file").write_text("")
    (tmp_path / "empty").mkdir()
    assert main(["--project-dir", str(tmp_path / given), "policy", "dev"]) == 2
    assert expected.format(d=tmp_path) in error_line(capsys)


def test_no_pulumi_yaml_up_to_the_root_is_one_error_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "dev"]) == 2
    assert f"no Pulumi.yaml in {tmp_path} or any folder above it" in error_line(capsys)


def test_project_dir_names_the_project_from_anywhere(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["--project-dir", str(PACKAGES_ROOT), "policy", "qa"]) == 2
    assert f"known stacks ({PACKAGES_ROOT}/stacks): dev, prod" in error_line(capsys)


def test_init_refuses_a_folder_that_is_not_empty_or_a_file(tmp_path, capsys):
    (tmp_path / "kept.txt").write_text("ours")
    assert main(["init", str(tmp_path)]) == 2
    assert f"azdl init {tmp_path}: not empty; expected a new or empty folder" in error_line(capsys)
    assert main(["init", str(tmp_path / "kept.txt")]) == 2
    assert "kept.txt: a file; expected a new or empty folder" in error_line(capsys)
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]
