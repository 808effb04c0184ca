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
        # torch.distributed does not import its fsdp subpackage itself.
        fsdp = importlib.import_module("torch.distributed.fsdp")
        self.assertTrue(hasattr(fsdp, "fully_shard"))


if __name__ == "__main__":
    unittest.main()
