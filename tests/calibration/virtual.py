"""Shared fixtures of the calibration tests: profile metadata of a virtual (simulated) broker."""


def virtual_meta(*, cpu_cap_fraction):
    """Metadata of a profile whose "measurements" come from the virtual harness (no real broker)."""
    return {
        "data": "virtual",
        "date": "",
        "host": "virtual",
        "cpu": "-",
        "kernel": "-",
        "broker_version": "truth",
        "cpu_cap_fraction": cpu_cap_fraction,
        "n_runs": 0,
        "rms_residual_s": 0.0,
    }
