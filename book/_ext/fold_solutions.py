"""Fold every sphinx-exercise ``solution`` into a dropdown (closed until the reader clicks).

sphinx-exercise folds a solution only when it is given ``:class: dropdown`` (sphinx-togglebutton
then collapses ``.admonition.dropdown``); this makes that the book-wide default, so chapters can
write plain ``{solution}`` blocks.
"""

from sphinx_exercise.nodes import solution_node


def _fold(app, doctree):
    for node in doctree.findall(solution_node):
        if "dropdown" not in node["classes"]:
            node["classes"].append("dropdown")


def setup(app):
    app.setup_extension("sphinx_exercise")
    app.connect("doctree-read", _fold)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
