# Fake QdstrmImporter: needs libdw.so.1 in a folder on LD_LIBRARY_PATH, like the real one on the lent GPU.
import json
import os
import shutil
import sys

args = sys.argv[1:]
if os.environ.get("FAKE_ARGV_LOG"):
    with open(os.environ["FAKE_ARGV_LOG"], "a") as fh:
        libs = "LD_LIBRARY_PATH=" + os.environ.get("LD_LIBRARY_PATH", "")
        fh.write(json.dumps(["QdstrmImporter", *args, libs]) + "\n")
dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
if not any(os.path.exists(os.path.join(d, "libdw.so.1")) for d in dirs):
    print(f"{sys.argv[0]}: error while loading shared libraries: libdw.so.1: cannot open shared object file: "
          "No such file or directory", file=sys.stderr)
    sys.exit(127)
src, dst = args[args.index("-i") + 1], args[args.index("-o") + 1]
assert open(src, "rb").read().startswith(b"QDSTRM")
print("Importing...", flush=True)
shutil.copyfile(os.environ["FAKE_NSYS_REP"], dst)
print("Import finished.")
