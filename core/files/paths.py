"""Per-user folders: profiles and settings in the config dir, measurements in the data dir,
generated model files in the cache dir.

ROOFLAB_CONFIG_DIR, ROOFLAB_DATA_DIR and ROOFLAB_CACHE_DIR override them (tests, portable installs)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def config_dir() -> Path:
    override = os.environ.get("ROOFLAB_CONFIG_DIR")
    return Path(override) if override else Path(platformdirs.user_config_dir("rooflab", appauthor=False))


def data_dir() -> Path:
    override = os.environ.get("ROOFLAB_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir("rooflab", appauthor=False))


def profiles_dir() -> Path:
    """User machine profiles, one JSON file each, beside the presets."""
    return config_dir() / "machines"


def cache_dir() -> Path:
    """Files rooflab can make again (random-weight GGUFs written for measuring)."""
    override = os.environ.get("ROOFLAB_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("rooflab", appauthor=False))
