"""The bringup's files are found through the ament index, an override, or a checkout: never by
where a module's file lies."""

from __future__ import annotations

from pathlib import Path

import pytest

from instant_fold_core.errors import ConfigError
from instant_fold_ros import bringup_share


def test_the_sourced_install_provides_config_launch_and_models() -> None:
    share = bringup_share.share_dir()
    assert share.parts[-2:] == ("share", "instant_fold")
    assert (bringup_share.config_dir() / "graphs" / "graph_check.yaml").is_file()
    assert (bringup_share.launch_dir() / "fold.launch.py").is_file()
    assert (bringup_share.models_dir() / "policy" / "config.json").is_file()


def test_environment_variables_override_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(bringup_share.CONFIG_ENV, str(tmp_path / "cfg"))
    monkeypatch.setenv(bringup_share.MODELS_ENV, str(tmp_path / "models"))
    assert bringup_share.config_dir() == tmp_path / "cfg"
    assert bringup_share.models_dir() == tmp_path / "models"


def test_without_an_install_a_checkout_in_the_working_directory_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path / "no_install"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="not installed"):
        bringup_share.share_dir()
    (tmp_path / "config" / "graphs").mkdir(parents=True)
    (tmp_path / "launch").mkdir()
    assert bringup_share.config_dir() == tmp_path / "config"
    with pytest.raises(ConfigError, match="rebuild it"):  # a share without models/ is no place to fall back from
        bringup_share.models_dir()
    (tmp_path / "models").mkdir()
    assert bringup_share.models_dir() == tmp_path / "models"
