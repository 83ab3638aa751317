"""``make catalogue``: regenerate benchmarks/zoo/catalogue.json (the torchvision and timm names,
families and weights the menus list) from the installed libraries, after a version bump."""

from __future__ import annotations

from benchmarks.zoo.catalogue import CATALOGUE_FILE, write


def main() -> None:
    data = write()
    print(f"{CATALOGUE_FILE}: {len(data['torchvision'])} torchvision and {len(data['timm'])} "
          f"timm models (torchvision {data['versions']['torchvision']}, "
          f"timm {data['versions']['timm']})")


if __name__ == "__main__":
    main()
