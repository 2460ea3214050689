"""CoNLL-2000 chunking and CoNLL-2002 Spanish NER for the benchmarks: the
column files and sklearn-crfsuite's tutorial features."""

#: task -> (training file, test file) under the data home.
TASKS = {"conll2000": ("conll2000/train.txt", "conll2000/test.txt"),
         "conll2002": ("conll2002/esp.train", "conll2002/esp.testb")}


def read_columns(path):
    """Sentences of ``(word, pos, label)`` rows from a CoNLL column file."""
    sents, cur = [], []
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line:
            if cur:
                sents.append(cur)
                cur = []
            continue
        cur.append(tuple(line.split()))
    if cur:
        sents.append(cur)
    return sents


def tutorial_features(sent, i):
    """sklearn-crfsuite's tutorial features of token ``i``."""
    word, pos = sent[i][0], sent[i][1]
    f = {"bias": 1.0, "word.lower()": word.lower(), "word[-3:]": word[-3:],
         "word[-2:]": word[-2:], "word.isupper()": word.isupper(),
         "word.istitle()": word.istitle(), "word.isdigit()": word.isdigit(),
         "postag": pos, "postag[:2]": pos[:2]}
    for k, name in ((i - 1, "-1"), (i + 1, "+1")):
        if 0 <= k < len(sent):
            w, p = sent[k][0], sent[k][1]
            f.update({f"{name}:word.lower()": w.lower(), f"{name}:word.istitle()": w.istitle(),
                      f"{name}:word.isupper()": w.isupper(), f"{name}:postag": p,
                      f"{name}:postag[:2]": p[:2]})
        else:
            f["BOS" if k < 0 else "EOS"] = True
    return f
