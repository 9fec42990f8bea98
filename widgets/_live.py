"""Redraw a widget after every notebook cell (the ``live=True`` option of several widgets)."""

from __future__ import annotations

__all__ = ["LiveRedraw"]


class LiveRedraw:
    """Mixin: ``_follow()`` calls ``self.refresh()`` after each cell until ``stop()``."""

    _hook = None

    def _follow(self) -> None:
        try:
            from IPython import get_ipython
        except ImportError:
            return
        ip = get_ipython()
        if ip is not None:
            self._hook = lambda *_: self.refresh()
            ip.events.register("post_run_cell", self._hook)

    def stop(self) -> None:
        """Stop redrawing after every cell (``live=True``)."""
        if self._hook is not None:
            from IPython import get_ipython

            ip = get_ipython()
            if ip is not None:
                ip.events.unregister("post_run_cell", self._hook)
            self._hook = None
