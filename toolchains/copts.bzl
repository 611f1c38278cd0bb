"""Compiler options shared by every rwsem C++ target. Load from every BUILD file.

    load("//toolchains:copts.bzl", "RWSEM_COPTS")
    cc_library(name = ..., copts = RWSEM_COPTS)
"""

RWSEM_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wnon-virtual-dtor",
    "-Wimplicit-fallthrough",
]

