"""The measuring machine, as every stored row names it: host, system, CPU model, cores, memory."""
from __future__ import annotations

import os
import platform
from pathlib import Path

import psutil


def machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"host": platform.node(), "system": f"{platform.system()} {platform.release()}",
            "cpu": model or platform.processor(), "cores": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1)}


def machine_label(m: dict | None = None) -> str:
    m = m or machine()
    return f"{m['cores']} cores ({m['cpu']}), {m['memory_gib']:g} GiB"
