"""The edge-m3 command run end to end elsewhere: offline on a real model (`make demo`), on an emulated Pi."""
