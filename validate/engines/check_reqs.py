"""What a carried payload asks of the GPU image's own packages, and whether the image meets it.

    python3 check_reqs.py make IMAGE_PACKAGES.txt WHEEL... > image_reqs.txt   (here: the carried wheels' metadata)
    python3 check_reqs.py IMAGE_REQS.txt                                      (there: the image's python, no PYTHONPATH)

`make` reads each wheel's Requires-Dist, keeps the requirements on packages the image holds (the payload leaves them
out: vllm_pack.sh) whose markers hold on the image (CPython 3.12, Linux x86-64, no extras), one per line as
`requirement  # wanted by WHEEL`. The check prints `FAIL name: requirement (image has VERSION or nothing)` per unmet
line, then `N failures`; unpack_payload.sh installs the fallback wheel of each failed name.
"""

from __future__ import annotations

import sys
import zipfile
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

IMAGE_ENV = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
             "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
             "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def wheel_requirements(path: str) -> list[Requirement]:
    """The Requires-Dist lines of one wheel whose markers hold on the image (no extras)."""
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(name).decode()
    out = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        try:
            req = Requirement(line.split(":", 1)[1].strip())
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(IMAGE_ENV):
            out.append(req)
    return out


def make(image_list: str, wheels: list[str]) -> list[str]:
    image = {canonicalize_name(n) for n in open(image_list).read().split()}
    lines = []
    for wheel in wheels:
        for req in wheel_requirements(wheel):
            if canonicalize_name(req.name) in image and str(req.specifier):
                lines.append(f"{req.name}{req.specifier}  # wanted by {wheel.rsplit('/', 1)[-1]}")
    return sorted(set(lines))


def check(reqs_file: str) -> int:
    failures = 0
    for raw in open(reqs_file):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            have = None
        try:
            ok = have is not None and req.specifier.contains(Version(have), prereleases=True)
        except InvalidVersion:
            ok = False
        if not ok:
            failures += 1
            print(f"FAIL {canonicalize_name(req.name)}: {req} (image has {have or 'nothing'})")
    print(f"{failures} failures")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        print("\n".join(make(sys.argv[2], sys.argv[3:])))
    elif len(sys.argv) == 2:
        sys.exit(check(sys.argv[1]))
    else:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        sys.exit(2)
