"""Where the platform kits read a bundle: Android assets and an iOS resource folder.

golden.json is test data (42 MB at full size): it goes to the test targets, never into the app.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from edge_m3.common.files import atomic_dir
from edge_m3.spec import GOLDEN

ANDROID_ASSETS = Path("src/main/assets/edge_m3")
IOS_RESOURCES = Path("EdgeM3Resources")
ANDROID_TEST_ASSETS = Path("src/androidTest/assets/edge_m3")
IOS_TEST_RESOURCES = Path("EdgeM3TestResources")


def copy_to_kits(bundle_dir: Path, android_root: Path, ios_root: Path) -> list[Path]:
    """Place the bundle where apps read it, and golden.json where only the test targets read
    it, so it never ships inside the app."""
    placed = []
    files = sorted(item for item in bundle_dir.iterdir() if item.is_file())
    for dest, test_dest in ((android_root / ANDROID_ASSETS, android_root / ANDROID_TEST_ASSETS),
                            (ios_root / IOS_RESOURCES, ios_root / IOS_TEST_RESOURCES)):
        for folder, wanted in ((dest, [f for f in files if f.name != GOLDEN]),
                               (test_dest, [f for f in files if f.name == GOLDEN])):
            with atomic_dir(folder) as tmp:
                for item in wanted:
                    shutil.copy2(item, tmp / item.name)
            placed.append(folder)
    return placed
