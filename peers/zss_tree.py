"""The tree the tree-edit metric compares (SPEC §5), built from an already loaded YAML value: a node
per mapping key and list item (`item_<i>`), a leaf per scalar, nothing for a null. Shared by the
metric peer (`peers.metrics`, ruamel) and the predecessor's pipeline (`peers.predecessor`, PyYAML),
which load and label differently; no import here, so either environment can use it."""


def yaml_tree(zss, v, label, is_null=lambda v: v is None):
    """(root, node count) of `v` under a `root` node; `label` names a key or a scalar."""
    root = zss.Node("root")
    count = [1]

    def attach(parent, v):
        if isinstance(v, dict):
            kids = [(label(k), val) for k, val in v.items()]
        elif isinstance(v, list):
            kids = [(f"item_{i}", item) for i, item in enumerate(v)]
        elif is_null(v):
            return
        else:
            parent.addkid(zss.Node(label(v)))
            count[0] += 1
            return
        for lab, val in kids:
            n = zss.Node(lab)
            parent.addkid(n)
            count[0] += 1
            attach(n, val)

    attach(root, v)
    return root, count[0]
