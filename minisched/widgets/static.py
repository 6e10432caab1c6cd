"""A widget that also carries a static rendering of what it shows.

A live kernel draws a widget from its model; a saved notebook has no model (the normalizer drops
widget state and views, as they hold random ids), so GitHub, nbviewer or JupyterLab without a kernel
would show nothing, or the widget's repr `VBox(children=(...`. `StaticVBox` adds an HTML rendering of
its state at the moment it is displayed: front-ends with a widget manager prefer the live view
(ranked above HTML), the others show the HTML.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets


class StaticVBox(ipywidgets.VBox):
    def __init__(self, children: Sequence[ipywidgets.Widget], static_html: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(list(children), **kwargs)
        self._static_html = static_html

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        data: dict[str, Any] | None = super()._repr_mimebundle_(**kwargs)
        if data is None:  # a widget without a view shows nothing, static or live
            return None
        data["text/html"] = self._static_html()
        return data
