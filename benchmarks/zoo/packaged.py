"""Files shipped inside installed packages (an embedded data set's CSV, a model's weights),
found from the package's metadata: the package itself is never imported. Torch-free."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path


def package_file(package: str, relative: str, what: str,
                 install: str = "pip install -r requirements.txt") -> Path:
    """``relative`` inside ``package``'s installed files; one line naming what needs it and
    how to install it otherwise."""
    try:
        path = Path(distribution(package).locate_file(relative))
    except PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise ValueError(f"{what} is read from the {package} package, which is not installed "
                         f"({install})")
    return path
