"""Writing the benchmarks' result files so that a reader never sees half of one."""
import os


def write_atomically(path, text):
    """Writes `text` to path + ".tmp", then renames it over `path`: an interrupted run leaves the
    previous file whole, or none."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
