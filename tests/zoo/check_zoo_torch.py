"""check_zoo_torch.py GOPT: `gopt info --json` on the zoo's Tensat benchmark models against
independent references: torchvision's parameter counts (resnext50_32x4d, squeezenet1_1, vgg19,
inception_v3 without its auxiliary head), and for the TASO/Tensat-only graphs (NasNet-A, NasRNN,
Tensat's BERT) parameter and node counts worked out here from TASO's builders
(examples/nasnet_a.py, nasrnn.py, bert.py). Needs Debian's python3-torch/-torchvision."""
import json
import subprocess
import sys

import torch  # noqa: F401  (torchvision needs it loaded)
import torchvision.models as tvm

GOPT = sys.argv[1]
failures = []


def info(spec):
    r = subprocess.run([GOPT, "info", spec, "--json"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def check(name, got, want):
    ok = got == want
    print("%s %s: gopt %s, reference %s" % ("ok  " if ok else "FAIL", name, got, want))
    if not ok:
        failures.append(name)


def torch_params(model):
    return sum(p.numel() for p in model.parameters())


def nasnet_reference():
    """(parameters, nodes) of TASO's nasnet_a.py graph with Tensat's 224x224 stem."""
    params, nodes = 64 * 3 * 49, 3  # stem conv, relu, maxpool
    def squeeze(cin, oc):
        return cin * oc, 2
    def sep(c, oc, k):  # grouped kxk (weight [oc, c/oc, k, k]) + 1x1
        return oc * (c // oc) * k * k + oc * oc, 2
    oc, cin = 128, 64
    for _ in range(3):
        prev_c = cur_c = cin
        for _ in range(5):
            p = [squeeze(cur_c, oc), squeeze(prev_c, oc)] + [sep(oc, oc, 3)] * 5
            params += sum(x[0] for x in p)
            nodes += sum(x[1] for x in p) + 3 + 5 + 1  # 3 pools, 5 adds, concat
            prev_c, cur_c = cur_c, 5 * oc
        oc *= 2
        p = [squeeze(cur_c, oc), squeeze(prev_c, oc), sep(oc, oc, 7), sep(oc, oc, 5),
             sep(oc, oc, 7), sep(oc, oc, 5), sep(oc, oc, 3)]
        params += sum(x[0] for x in p)
        nodes += sum(x[1] for x in p) + 4 + 5 + 1  # 4 pools, 5 adds, concat
        cin = 5 * oc
    return params, nodes


check("resnext50 params", info("resnext50")["trainable"], torch_params(tvm.resnext50_32x4d()))
check("squeezenet params", info("squeezenet")["trainable"], torch_params(tvm.squeezenet1_1()))
check("vgg19 params", info("vgg19")["trainable"], torch_params(tvm.vgg19()))
inc = tvm.inception_v3(aux_logits=True, init_weights=False)
check("inception_v3 params", info("inception_v3")["trainable"],
      torch_params(inc) - torch_params(inc.AuxLogits))
# The tensat=1 forms drop exactly the biases / BN affine parameters / classifier.
check("squeezenet:tensat=1 params", info("squeezenet:tensat=1")["trainable"],
      sum(p.numel() for n, p in tvm.squeezenet1_1().named_parameters() if n.endswith("weight")))
check("vgg19:tensat=1 params", info("vgg19:tensat=1")["trainable"],
      sum(p.numel() for n, p in tvm.vgg19().named_parameters() if n.endswith("weight")))
rx = tvm.resnext50_32x4d()
check("resnext50:tensat=1 params", info("resnext50:tensat=1")["trainable"],
      sum(m.weight.numel() for m in rx.modules() if isinstance(m, torch.nn.Conv2d)))
check("inception_v3:tensat=1 params", info("inception_v3:tensat=1")["trainable"],
      sum(m.weight.numel() for n, m in inc.named_modules()
          if isinstance(m, torch.nn.Conv2d) and not n.startswith("AuxLogits")))
p, n = nasnet_reference()
j = info("nasnet_a")
check("nasnet_a params", j["trainable"], p)
check("nasnet_a nodes", j["nodes"], n)
j = info("nasrnn")
check("nasrnn params", j["trainable"], 5 * 16 * 512 * 512 + 512)
check("nasrnn nodes", j["nodes"], 5 * (8 * 3 + 22))
j = info("bert_tensat")
check("bert_tensat params", j["trainable"], 8 * 4 * 1024 * 1024)
check("bert_tensat nodes", j["nodes"], 1 + 8 * 14)
sys.exit(1 if failures else 0)
