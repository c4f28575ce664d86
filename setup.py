"""The wheel carries the repository's data folders, cases/, profiles/ and protocols/, inside the package as
nvgg/_data/ (read by nvgg/data.py); everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = ("cases", "profiles", "protocols")


class BuildWithData(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout's own folders
        root = Path(__file__).resolve().parent
        for name in DATA:
            target = Path(self.build_lib) / "nvgg" / "_data" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(root / name, target)


setup(cmdclass={"build_py": BuildWithData})
