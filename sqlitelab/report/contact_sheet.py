"""A contact sheet: every figure of figures/ on one page per notebook, each under its name, to
read a collection's figures side by side (before and after a change to the plotting code).

    python -m sqlitelab.report.contact_sheet --out /tmp/before        # one PNG per notebook
    python -m sqlitelab.report.contact_sheet --figures figures --out /tmp/after --only 06 04
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402  (after the backend is chosen)
import matplotlib.pyplot as plt  # noqa: E402

from sqlitelab.core import config  # noqa: E402

COLUMNS = 2  # figures side by side on a sheet


def sheet(folder: Path, out: Path) -> Path:
    """One notebook's figures (folder/*.png), two to a row, each titled with its file name."""
    pngs = sorted(folder.glob("*.png"))
    if not pngs:
        raise FileNotFoundError(f"no PNG in {folder}")
    rows = math.ceil(len(pngs) / COLUMNS)
    fig, axes = plt.subplots(rows, COLUMNS, figsize=(8 * COLUMNS, 5.2 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, png in zip(axes.flat, pngs):
        ax.imshow(mpimg.imread(png))
        ax.set_title(f"{folder.name}/{png.name}", fontsize=11, loc="left")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.report.contact_sheet",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--figures", type=Path, default=config.FIGURES_DIR, help="the figures' folder")
    ap.add_argument("--out", type=Path, required=True, help="folder for the sheets")
    ap.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 04 06")
    args = ap.parse_args(argv)
    folders = [d for d in sorted(args.figures.iterdir()) if d.is_dir() and any(d.glob("*.png"))
               and (not args.only or any(d.name.startswith(p) for p in args.only))]
    if not folders:
        ap.error(f"no figures in {args.figures}" + (f" matching {args.only}" if args.only else ""))
    for d in folders:
        print(sheet(d, args.out / f"{d.name}.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
