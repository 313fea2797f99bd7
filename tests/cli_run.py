"""The CLI run in-process for tests: `run(capsys, *argv)` -> (exit status, stdout, stderr)."""

from roofline.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """`roofline *argv` in this process; argparse's SystemExit becomes the status."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse exits
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
