"""Jupyter widgets for the acllab lessons (ipywidgets and plotly).

This is the notebook layer on top of the ``acllab`` runtime: widgets call pure functions in
acllab (scenario -> trace -> figure) and hold view state only. acllab never imports this
package. In notebooks, alias ipywidgets as ``ipw``, never as ``widgets``.
"""

__all__: list[str] = []
