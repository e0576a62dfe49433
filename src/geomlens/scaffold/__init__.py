"""``geomlens new-plugin NAME``: a ready-to-install plugin package, written from a template.

The package has a pyproject with the ``geomlens.analyses`` entry point, an analysis with a
config (the participation ratio of pooled representations, a small real statistic to replace
with your own) and tests that show the patterns geomlens analyses are tested with. It installs
with pip, appears in ``geomlens list`` and passes its own tests as generated. See
docs/plugins.md for the plugin guide.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

#: Analysis names the scaffold accepts: lower case, digits and single hyphens, starting with a letter.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
TEMPLATE_FOLDER = Path(__file__).with_name("template")


def plugin_names(name: str) -> dict[str, str]:
    """The names one analysis name implies: distribution, import package and class."""
    return {
        "name": name,
        "distribution": f"geomlens-{name}",
        "package": "geomlens_" + name.replace("-", "_"),
        "class_name": "".join(part.capitalize() for part in name.split("-")),
    }


def check_name(name: str) -> None:
    """Refuse names that would not make a valid package or that clash with an analysis."""
    from geomlens.analyses.registry import list_analyses

    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"Plugin name {name!r} must be lower case letters and digits, words joined by single "
            "hyphens, starting with a letter (e.g. 'linear-cka')."
        )
    class_name = plugin_names(name)["class_name"]
    if keyword.iskeyword(class_name) or keyword.iskeyword(name):
        raise ValueError(
            f"Plugin name {name!r} would make a class named {class_name}, a Python keyword, so "
            f"the package would not import; pick another name (e.g. '{name}-analysis')."
        )
    if name in list_analyses():
        raise ValueError(
            f"An analysis named {name!r} already exists; pick another name (taken: "
            f"{', '.join(list_analyses())})."
        )


def new_plugin(name: str, directory: str | Path = ".") -> Path:
    """Write the plugin package ``geomlens-NAME`` under ``directory``; return its folder."""
    import jinja2

    from geomlens.version import __version__

    check_name(name)
    names = plugin_names(name)
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"--dir {directory} is a file, not a folder; give a folder to write in.")
    root = directory / names["distribution"]
    if root.exists() and not root.is_dir():
        raise FileExistsError(f"{root} exists and is a file; choose another --dir.")
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} already exists and is not empty; choose another --dir.")
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_FOLDER),
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    context = {**names, "geomlens_version": __version__}
    for template in sorted(TEMPLATE_FOLDER.rglob("*.j2")):
        relative = template.relative_to(TEMPLATE_FOLDER).as_posix()
        target = root / relative.removesuffix(".j2").replace("__package__", names["package"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(environment.get_template(relative).render(context), encoding="utf-8")
    return root
