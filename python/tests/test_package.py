"""The package imports without torch-side effects and says what it is."""

import importlib
import unittest


class PackageTest(unittest.TestCase):
    def test_imports(self) -> None:
        fsdpc = importlib.import_module("fsdpc")
        self.assertIsInstance(fsdpc.__all__, list)

    def test_torch_present(self) -> None:
        # The tests run in the torch root (.ci/install-torch); a missing
        # torch there is a broken set-up, not a skip.
        torch = importlib.import_module("torch")
        self.assertTrue(hasattr(torch.distributed, "fsdp"))


if __name__ == "__main__":
    unittest.main()
