"""Helpers the tests share: one place each for the files a test writes, the CLI it drives, the loopback
server it starts and the rows it reads back (imported as ``tests.helpers``; the repository root is on
``sys.path`` through pytest's ``pythonpath = ["."]``, and ``tests`` is a namespace package).

Fixtures stay in the ``conftest.py`` files; what is here is plain functions, so a test module, a
fixture and a helper script can all use them.
"""

from tests.helpers.cli import error_line, invoke, invoke_error_line, trialgrid
from tests.helpers.files import CONFIGS, ROOT, bundled_sweep, quickstart_dict, quickstart_sweep, write_yaml
from tests.helpers.rows import written_rows
from tests.helpers.serving import serving

__all__ = ["CONFIGS", "ROOT", "bundled_sweep", "error_line", "invoke", "invoke_error_line", "quickstart_dict", "quickstart_sweep",
           "serving", "trialgrid", "write_yaml", "written_rows"]
