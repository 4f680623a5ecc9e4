"""A fake NVIDIA GPU host for the GPU measurements (measure/measure_gpu.py): the driver's per-GPU directory
and the device node path that measure_gpu looks at, both under a test's temporary directory."""


def gpu_host(tmp_path, count=2):
    """``(gpus_dir, dev)``: ``count`` entries like ``/proc/driver/nvidia/gpus/0000:18:00.0`` in ``gpus_dir``,
    and the path of a ``/dev/nvidia0`` that does not exist (the entries alone say there are GPUs)."""
    gpus = tmp_path / "gpus"
    gpus.mkdir()
    for index in range(count):
        (gpus / ("0000:%02x:00.0" % (0x18 + index))).mkdir()
    return str(gpus), str(tmp_path / "nvidia0")
