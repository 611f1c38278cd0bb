"""What a workspace that depends on rwsem must declare, in one call.

In the consumer's WORKSPACE (the exact lines are in README.md, "Using rwsem
from your workspace"):

    local_repository(name = "rwsem", path = "/path/to/rwsem")
    load("@rwsem//:repositories.bzl", "rwsem_dependencies")
    rwsem_dependencies()

Bazel 4.2.3 downloads @rules_cc, @rules_java and @remote_coverage_tools even
for a plain cc_test; rwsem keeps offline stand-ins for them in third_party/.
rwsem_dependencies() declares each of the three that the consumer has not
declared itself. It declares no toolchain: //lib:rwsem builds with the
consumer's own C++ toolchain (Bazel's auto-configured gcc or clang), which
must compile C++17 (`build --cxxopt=-std=c++17` in the consumer's .bazelrc;
lib/rwsem/config.h stops the build with that hint otherwise).
"""

# The shims live in rwsem's third_party/. A local_repository path given here
# would be taken relative to the consumer's workspace, not to rwsem, so a
# small repository rule finds rwsem's own directory from a label instead
# (a label written in this file belongs to the repository this file is in,
# whatever name the consumer gave it) and links the shim's files.
def _rwsem_shim_impl(repository_ctx):
    rwsem_root = repository_ctx.path(repository_ctx.attr._rwsem_workspace).dirname
    shim = rwsem_root.get_child("third_party").get_child(repository_ctx.attr.shim)
    if not shim.exists:
        fail("rwsem: no offline shim at %s" % shim)
    for entry in shim.readdir():
        repository_ctx.symlink(entry, entry.basename)

_rwsem_shim = repository_rule(
    implementation = _rwsem_shim_impl,
    attrs = {
        "shim": attr.string(mandatory = True, doc = "directory under rwsem's third_party/"),
        "_rwsem_workspace": attr.label(default = Label("//:WORKSPACE"), allow_single_file = True),
    },
    local = True,
    doc = "One of rwsem's offline stand-ins (third_party/<shim>), as a repository.",
)

# Repository name -> directory under third_party/.
_SHIMS = {
    "rules_cc": "rules_cc",
    "rules_java": "rules_java",
    "remote_coverage_tools": "remote_coverage_tools",
}

def rwsem_dependencies():
    """Declares the repositories rwsem needs that the workspace lacks.

    Call it from WORKSPACE after the rwsem repository itself. A repository
    of the same name that the workspace declared before the call is left as
    it is.
    """
    for name, shim in _SHIMS.items():
        if not native.existing_rule(name):
            _rwsem_shim(name = name, shim = shim)
