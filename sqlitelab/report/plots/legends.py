"""Legends that fit: placed in the axes, below them or beside them by how many entries they
have, the one legend of a figure of panels, and fit_legends, which moves a legend in the axes
that covers data below them, every below-the-axes legend under its tick labels, and takes
columns off any legend wider than the canvas; clipped_legends names the ones that still run off it."""
from __future__ import annotations

import warnings

from matplotlib.transforms import IdentityTransform
from matplotlib.transforms import ScaledTranslation

from sqlitelab.report.plots.marks import data_under, drawn_data, renderer_of

def panel_legend(key_ax, handles: list, ncols: int = 4, fontsize: float = 8):
    """The one legend of a figure of panels, centred in its own row (see new_panels)."""
    return _make_legend(key_ax, handles, loc="upper center", bbox_to_anchor=(0.5, 1.0),
                        ncols=min(ncols, max(len(handles), 1)), fontsize=fontsize)


def _legend(ax, handles: list | None = None, below: bool = False):
    """In the axes when there are four entries or fewer; below them, clear of the data, when
    there are more or when an article's line crosses the plot (it goes wherever its numbers go); to the
    right, in one column, when there are very many."""
    handles = handles if handles is not None else ax.get_legend_handles_labels()[0]
    n = len(handles)
    if n > 12:
        return _make_legend(ax, handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    if below or n > 4:
        return _legend_below(ax, handles, ncols=3)
    return _make_legend(ax, handles)


def _legend_below(ax, handles: list, ncols: int):
    """A legend under the axes' tick labels and label, whatever their height (fit_legends
    measures them and moves it)."""
    lg = _make_legend(ax, handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=ncols,
                      fontsize=8)
    lg._lab_below = True
    return lg


def _make_legend(owner, handles: list, labels: list | None = None, **kw):
    """`owner.legend(...)`, remembering how it was made so that fit_legends can make it again
    with fewer columns."""
    lg = owner.legend(handles, labels, **kw) if labels is not None else owner.legend(handles=handles, **kw)
    lg._lab_spec = (owner, handles, labels, kw)
    return lg


def _narrower(lg):
    """The same legend with one column fewer (None when it has one already)."""
    spec = getattr(lg, "_lab_spec", None)
    if spec is None:  # a legend made elsewhere: rebuilt from what it shows
        owner = lg.axes if lg.axes is not None else lg.figure
        spec = (owner, list(lg.legend_handles), [t.get_text() for t in lg.get_texts()],
                {"loc": lg._loc, "bbox_to_anchor": lg.get_bbox_to_anchor(),  # already in pixels
                 "bbox_transform": IdentityTransform(), "fontsize": lg.prop.get_size(),
                 "ncols": lg._ncols})
    owner, handles, labels, kw = spec
    ncols = kw.get("ncols", 1)
    if ncols <= 1:
        return None
    below = getattr(lg, "_lab_below", False)
    lg.remove()
    new = _make_legend(owner, handles, labels, **{**kw, "ncols": ncols - 1})
    new._lab_below = below
    return new


def _extra_handles(*axes) -> list:
    """The labelled artists of the axes (limit rings, an article's lines, reference lines),
    each label once."""
    out, seen = [], set()
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in seen:
                seen.add(label)
                out.append(h)
    return out


def _legends(fig) -> list:
    return [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)


def clipped_legends(fig, tolerance_px: float = 1.0) -> list[str]:
    """The legends of `fig` whose drawn extent is not inside the figure's canvas."""
    renderer_of(fig)
    fb = fig.bbox
    out = []
    for lg in _legends(fig):
        e = lg.get_window_extent()
        if (e.x0 < fb.x0 - tolerance_px or e.y0 < fb.y0 - tolerance_px
                or e.x1 > fb.x1 + tolerance_px or e.y1 > fb.y1 + tolerance_px):
            labels = [t.get_text() for t in lg.get_texts()][:3]
            out.append(f"legend {labels}… at {tuple(round(v) for v in e.extents)} "
                       f"outside the canvas {tuple(round(v) for v in fb.extents)} (px)")
    return out


def fit_legends(fig):
    """Lay the figure out, put every below-the-axes legend under its axes' tick labels, and
    take columns off any legend wider than the canvas until it fits — or, where the layout could
    not give the axes any room beside a legend (matplotlib's "axes sizes collapsed"), off every
    legend of several columns. Returns `fig`."""
    for _ in range(20):
        with warnings.catch_warnings(record=True) as said:  # a legend too wide squeezes the axes
            warnings.simplefilter("always")
            fig.draw_without_rendering()
        collapsed = any("constrained_layout not applied" in str(w.message) for w in said)
        renderer = fig.canvas.get_renderer()
        moved = False
        for ax in fig.axes:
            lg = ax.get_legend()
            if lg is not None and not getattr(lg, "_lab_below", False) and ax.axison and getattr(lg, "_lab_spec", None) \
                    and data_under(ax, lg.get_window_extent(renderer), drawn_data(ax, renderer), renderer):
                _, handles, _, _ = lg._lab_spec  # a legend in the axes that covers data goes below them
                lg.remove()
                lg = _legend_below(ax, handles, ncols=3)
                moved = True
            if lg is None or not getattr(lg, "_lab_below", False):
                continue
            under = ax.xaxis.get_tightbbox(renderer)
            drop = (ax.bbox.y0 - under.y0) / fig.dpi + 0.06 if under is not None else 0.06
            if abs(drop - getattr(lg, "_lab_drop", -1)) > 0.01:
                lg._lab_drop = drop
                lg.set_bbox_to_anchor((0.5, 0.0), transform=ax.transAxes + ScaledTranslation(
                    0, -drop, fig.dpi_scale_trans))
                moved = True
        if moved:
            continue
        bad = [lg for lg in _legends(fig) if not _inside(lg, fig) or (collapsed and lg._ncols > 1)]
        if not bad:
            break
        narrowed = [_narrower(lg) for lg in bad]
        if not any(n is not None for n in narrowed):
            break
    return fig


def _inside(lg, fig, tolerance_px: float = 1.0) -> bool:
    e, fb = lg.get_window_extent(), fig.bbox
    return (e.x0 >= fb.x0 - tolerance_px and e.y0 >= fb.y0 - tolerance_px
            and e.x1 <= fb.x1 + tolerance_px and e.y1 <= fb.y1 + tolerance_px)


class ClippedLegendError(ValueError):
    """A figure's legend runs off its canvas: the saved image would cut it."""
