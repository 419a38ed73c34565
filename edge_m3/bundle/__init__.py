"""Step 4: the bundle on disk (verified manifest and files) and where the kits read it."""

from edge_m3.bundle.bundle import Bundle, load_bundle
from edge_m3.bundle.kits import (
    ANDROID_ASSETS,
    ANDROID_TEST_ASSETS,
    IOS_RESOURCES,
    IOS_TEST_RESOURCES,
    copy_to_kits,
)

__all__ = ["ANDROID_ASSETS", "ANDROID_TEST_ASSETS", "IOS_RESOURCES", "IOS_TEST_RESOURCES", "Bundle",
           "copy_to_kits", "load_bundle"]
