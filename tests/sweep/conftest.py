"""Fixtures shared by the sweep's tests."""

import os

import pytest


@pytest.fixture
def savez_that_dies():
  """make(partial, message): a stand-in for np.savez that writes the bytes `partial` and
  then raises OSError(message), as a write cut short by a full disk does. It takes a path
  or an open file (the chunk store writes through its own handle to fsync it)."""
  def make(partial: bytes, message: str):
    def savez(file, *args, **kwargs):
      if isinstance(file, str | os.PathLike):
        with open(file, "wb") as handle:
          handle.write(partial)
      else:
        file.write(partial)
      raise OSError(message)
    return savez
  return make
