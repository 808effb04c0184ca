# Writes, per transformers model_type, what accelerate's FSDP2 path reads
# of a model: its classes by module name (layer indices as *), the
# model's _no_split_modules, the input and output embeddings
# (get_input_embeddings, get_output_embeddings) and the final norm
# (accelerate's own _find_final_norm), for fsdpc's ir/accelerate.
import json, re, sys, warnings
warnings.filterwarnings("ignore")
import torch, transformers, accelerate
from transformers import AutoConfig, AutoModelForCausalLM
from accelerate.utils.fsdp_utils import _find_final_norm
out = {"transformers": transformers.__version__, "accelerate": accelerate.__version__, "families": {}}
for path in sys.argv[2:]:
    d = json.load(open(path))
    mt = d.pop("model_type")
    cfg = AutoConfig.for_model(mt, **d)
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    names = {id(mod): n for n, mod in m.named_modules()}
    fam = out["families"].setdefault(mt, {"modules": {}})
    classes = fam["modules"]
    for n, mod in m.named_modules():
        key = re.sub(r"(^|\.)\d+(?=\.|$)", r"\1*", n)
        c = type(mod).__name__
        have = classes.get(key, "").split("|") if key in classes else []
        if c not in have:
            have.append(c)
        classes[key] = "|".join(sorted(have))
    ns = getattr(m, "_no_split_modules", None)
    # Sorted: transformers gathers _no_split_modules in a set, whose order
    # changes from run to run; which modules match does not depend on it.
    entry = {"class": type(m).__name__, "no_split_modules": None if ns is None else sorted(ns),
             "input_embeddings": names.get(id(m.get_input_embeddings())),
             "output_embeddings": names.get(id(m.get_output_embeddings())),
             "final_norm": names.get(id(_find_final_norm(m)))}
    for k, v in entry.items():
        if k in fam and fam[k] != v:
            raise SystemExit("%s: %s differs between configs: %r and %r" % (mt, k, fam[k], v))
        fam[k] = v
json.dump(out, open(sys.argv[1], "w"), indent=1, sort_keys=True)
