"""Progress bars that still read well after the run, in a saved notebook too.

tqdm.auto draws a live widget in Jupyter, but a saved notebook keeps only the text the widget had
when it appeared ("0%| | 0/150"), and that is what GitHub, nbviewer and other static views show.
:class:`progress_bar` is tqdm.auto's bar with one change in a notebook: the widget shows while the
loop runs; when the bar closes, it goes and one plain line stays, e.g. ``SST-2: 50/50, 5 s``
(``SST-2: stopped at 20/50, 3 s`` when the loop broke off). In a terminal it is tqdm's own bar.
"""

from __future__ import annotations

from tqdm.auto import tqdm as _auto

try:
    from tqdm.notebook import TqdmHBox, tqdm_notebook
except ImportError:  # no ipywidgets: tqdm.auto is the terminal bar
    TqdmHBox = tqdm_notebook = None
IN_NOTEBOOK = tqdm_notebook is not None and issubclass(_auto, tqdm_notebook)

__all__ = ["progress_bar", "IN_NOTEBOOK"]


class progress_bar(_auto):  # noqa: N801  (used like tqdm: for x in progress_bar(items, desc=...))
    """tqdm.auto's progress bar (same arguments); in a notebook it leaves one line when it closes."""

    def __init__(self, *args, **kwargs):
        if IN_NOTEBOOK:
            kwargs["leave"] = False  # the widget goes when the bar closes; the line below stays
        super().__init__(*args, **kwargs)

    if IN_NOTEBOOK:

        @staticmethod
        def status_printer(_, total=None, desc=None, ncols=None):
            box = tqdm_notebook.status_printer(_, total, desc, ncols)
            box.__class__ = _SilentBox
            return box

    def close(self):
        line = self.closing_line() if IN_NOTEBOOK and not self.disable else None  # tqdm disables a closed bar
        super().close()
        if line:
            print(line, flush=True)

    def closing_line(self) -> str:
        """``desc: n/total, seconds s``, or ``desc: stopped at n/total, …`` before the end."""
        d = self.format_dict
        n, total = (
            self.format_sizeof(x) + d["unit"] if d["unit_scale"] else f"{x:g}" for x in (d["n"], d["total"] or 0)
        )
        stopped = "stopped at " if d["total"] is not None and d["n"] < d["total"] else ""
        seconds = f"{d['elapsed']:.1f}" if d["elapsed"] < 10 else f"{d['elapsed']:.0f}"
        return f"{d['prefix'] + ': ' if d['prefix'] else ''}{stopped}{n}{'' if d['total'] is None else '/' + total}, {seconds} s"


if IN_NOTEBOOK:

    class _SilentBox(TqdmHBox):
        """The bar's widget, whose saved text is empty: a static view shows only the closing line."""

        def __repr__(self, pretty=False):
            return ""
