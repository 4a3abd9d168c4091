"""sklearn's Cohen's kappa for two JSON lists of verdicts (argv[1], argv[2]): 3-point and usable-vs-not."""
import json
import sys

from sklearn.metrics import cohen_kappa_score

a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
bin_ = lambda v: ["usable" if x == "usable" else "not" for x in v]
print(json.dumps({"kappa3": cohen_kappa_score(a, b), "kappa_binary": cohen_kappa_score(bin_(a), bin_(b))}))
