"""Write the thin report notebooks (run once by a developer; the .ipynb files are committed)."""

import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell


def params(src):
    c = code(src)
    c.metadata["tags"] = ["parameters"]
    return c


def write(path, cells):
    nb = nbf.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbf.write(nb, path)


write("notebooks/01_baselines.ipynb", [
    md("# 01 · Memory baselines: ReAct / ICL / Traj on ALFWorld\n\n"
       "The same white-box agent on the same tasks under three memory conditions: no memory (ReAct), a fixed "
       "demonstration per task type (ICL) and the most similar valid_train expert trajectory (Traj, MiniLM "
       "retrieval, never the task's own game). Episodes give success, steps, memory tokens and SR@k; "
       "teacher-forced next-action accuracy on the expert plans is the low-variance companion metric."),
    code("import pandas as pd\n\nfrom workbench.eval import condition_table, run_conditions\n"
         "from workbench.envs.memory_base import expert_success_table\n"
         "from workbench.models import load_model\nfrom workbench.reporting import Reports\n"
         "from workbench.viz import sr_at_k_figure"),
    params('models = ["smollm2-135m-instruct"]\nsplit = "valid_unseen"\nconditions = ["none", "icl", "traj"]\n'
           'episode_tasks = "0:1"\ntf_tasks = "0:2"\nmax_steps = 3\nprofile = "smoke"\n'
           'reports_dir = "../runs/nb-smoke/reports"\nruns_dir = "../runs/nb-smoke"'),
    code('reports = Reports(reports_dir, "01_baselines", parameters=dict(models=models, split=split, conditions=conditions,\n'
         '    episode_tasks=episode_tasks, tf_tasks=tf_tasks, max_steps=max_steps, profile=profile))'),
    md("## The experts\n\nThe planner's plan (read once at reset, replayed) and ALFWorld's handcoded searcher "
       "(shown the admissible commands in its own grammar), from the committed expert files."),
    code('experts = expert_success_table()\nreports.table(experts, "expert_success")\nexperts'),
    md("## Agents under each memory condition"),
    code('results = {m: run_conditions(load_model(m), conditions, split, episode_tasks, tf_tasks, max_steps,\n'
         '                             f"{runs_dir}/01_baselines/{m}") for m in models}\n'
         'names = {"none": "ReAct (none)", "icl": "ICL", "traj": "Traj"}\n'
         'table = pd.concat({m: condition_table(results[m]).rename(index=names) for m in models})\n'
         'reports.table(table, f"baselines_{split}")\n'
         'reports.metrics({m: {c: {k: results[m][c][k] for k in ("n_episodes", "success_rate", "avg_steps", "memory_tokens",\n'
         '    "teacher_forced", "sr_at_k")} for c in conditions} for m in models})\n'
         'table'),
    md("## Success within k steps"),
    code('fig = sr_at_k_figure({f"{m} · {c}": results[m][c]["sr_at_k"] for m in models for c in conditions},\n'
         '                     title=f"SR@k on {split}")\n'
         'reports.figure(fig, f"sr_at_k_{split}")\nfig'),
    md("## By task type (episode success, %)"),
    code('per_type = pd.concat({m: pd.DataFrame({c: {t: 100 * v["success_rate"] for t, v in results[m][c]["by_task_type"].items()}\n'
         '                                        for c in conditions}) for m in models})\n'
         'reports.table(per_type, f"success_by_type_{split}")\nper_type'),
])

write("notebooks/02_retrieval_heads.ipynb", [
    md("# 02 · Retrieval heads: Figure 8 (head scores) and Figure 2 (head masking)\n\n"
       "AGMR section 2.1 and appendix C. A **retrieval supervision set** pairs the prompt right before a key "
       "decision with the memory snippet that supports it: tasks that fail without memory and succeed with the "
       "retrieved trajectory (task-level), and, for a model that fails every episode, teacher-forced steps where "
       "the retrieved trajectory turns a wrong choice into the expert's action (step-level; the supporting "
       "segment is the one with the same action template, its action and thought tokens the key span). Every "
       "head is scored by the attention its last prompt token pays to the key span, summed over the set "
       "(Figure 8). The top-k heads are then masked under Traj memory and compared with k random heads "
       "(several draws): if they retrieve memory, masking them should remove much of the memory gain "
       "(Traj − ICL) while random heads should not (Figure 2). Teacher-forced next-action accuracy is the "
       "primary signal; episode success is shown beside it when episodes are played."),
    code("%matplotlib inline\nimport pandas as pd\nfrom IPython.display import display\n\n"
         "from workbench.attention import build_supervision, head_ablation, retrieval_heads, supervision_summary, try_load_model\n"
         "from workbench.reporting import Reports\nfrom workbench.viz import head_ablation_figure, head_scores_figure"),
    params('models = ["smollm2-135m-instruct"]\nsupervision_split = "valid_seen"\nsupervision_tasks = "0:4"\n'
           'supervision_episode_tasks = ""\nmax_pairs = 12\nanalyzer = "template"\nsplit = "valid_unseen"\n'
           'tf_tasks = "0:2"\nepisode_tasks = ""\nmax_steps = 3\ntop_k = 5\nmask_k = 5\nn_random = 2\nprofile = "smoke"\n'
           'reports_dir = "../runs/nb-smoke/reports"\nruns_dir = "../runs/nb-smoke"'),
    code('reports = Reports(reports_dir, "02_retrieval_heads", parameters=dict(models=models,\n'
         '    supervision_split=supervision_split, supervision_tasks=supervision_tasks,\n'
         '    supervision_episode_tasks=supervision_episode_tasks, max_pairs=max_pairs, analyzer=analyzer, split=split,\n'
         '    tf_tasks=tf_tasks, episode_tasks=episode_tasks, max_steps=max_steps, top_k=top_k, mask_k=mask_k,\n'
         '    n_random=n_random, profile=profile))\n'
         'lms = {name: lm for name in models if (lm := try_load_model(name)) is not None}\n'
         'folders = {name: f"{runs_dir}/02_retrieval_heads/{name}" for name in lms}\n'
         'list(lms)'),
    md("## The retrieval supervision set"),
    code('supervision = {name: build_supervision(lm, supervision_split, supervision_tasks, folders[name], analyzer=analyzer,\n'
         '                                      max_pairs=max_pairs, episode_tasks=supervision_episode_tasks,\n'
         '                                      max_steps=max_steps) for name, lm in lms.items()}\n'
         'summary = pd.DataFrame({name: supervision_summary(records) for name, records in supervision.items()})\n'
         'reports.table(summary, f"supervision_{supervision_split}", floatfmt=".1f")\nsummary'),
    code('example = next(iter(supervision.values()))[0]\n'
         'print(f"{example.task_id} step {example.step}: target {example.target_action!r} (without memory: {example.wrong_action!r})")\n'
         'print("key context:", example.key_context)'),
    md("## Figure 8: retrieval scores of every head"),
    code('scores = {name: retrieval_heads(lm, supervision[name], folders[name]) for name, lm in lms.items()}\n'
         'fig = head_scores_figure(list(scores.values()), k=top_k, title=f"Retrieval scores on {supervision_split}")\n'
         'reports.figure(fig, f"fig8_head_scores_{supervision_split}")\nfig'),
    code('top = pd.DataFrame({name: [f"L{layer}.H{head}" for layer, head in s.top_k(top_k)] for name, s in scores.items()},\n'
         '                   index=pd.RangeIndex(1, top_k + 1, name="rank"))\n'
         'reports.table(top, "top_heads")\ntop'),
    md("## Figure 2: masking the top-k heads vs k random heads\n\n`mask_k` heads are masked (the paper masks "
       "10 of Qwen-2.5-7B's 784 heads and 5 of Llama-3.1-8B's 1024; SmolLM2-135M has 270)."),
    code('ablation = {name: head_ablation(lm, scores[name].top_k(mask_k), split, tf_tasks, folders[name],\n'
         '                              episode_tasks=episode_tasks, max_steps=max_steps, n_random=n_random)\n'
         '            for name, lm in lms.items()}\n'
         'for name, result in ablation.items():\n'
         '    fig = head_ablation_figure(result, title=f"Head masking, {name}, {split}")\n'
         '    reports.figure(fig, f"fig2_head_masking_{split}_{name}")\n'
         '    display(fig)'),
    code('table = pd.concat({name: result.table() for name, result in ablation.items()}, names=["model"])\n'
         'reports.table(table, f"head_masking_{split}")\n'
         'reports.metrics({name: {"supervision": supervision_summary(supervision[name]), "top_heads": scores[name].top_k(top_k),\n'
         '                        "masked_heads": scores[name].top_k(mask_k),\n'
         '                        **ablation[name].metrics()} for name in lms})\n'
         'table'),
])

write("notebooks/03_utilization.ipynb", [
    md("# 03 · Memory utilization: Figure 4 (C matrices) and Figure 3 (segment masking)\n\n"
       "AGMR sections 2.1–2.2. With the retrieval heads of notebook 02 (recomputed here with the same "
       "parameters when 02 has not run), the context utilization matrix **C** records, for every decision step "
       "u_t and memory segment s_l (observation tokens excluded), the n_t-rescaled attention of q_t to the "
       "segment, averaged over the heads. C is computed while the model is teacher-forced along each task's "
       "expert plan (and on played episodes when asked) and stored beside the run (`utilization.jsonl`). "
       "Figure 4: C of representative tasks, the critical error step boxed and the ideal memory use marked. "
       "Figure 3: removing the top-20% segments by peak utilization c^max should hurt far more than removing "
       "the bottom 20%. The explorer at the end reads any task step by step."),
    code("%matplotlib inline\nimport pandas as pd\nfrom IPython.display import display\n\n"
         "from workbench.attention import build_supervision, representative, retrieval_heads, segment_masking, try_load_model\n"
         "from workbench.reporting import Reports\n"
         "from workbench.viz import episode_utilization_figure, segment_masking_figure, utilization_explorer"),
    params('models = ["smollm2-135m-instruct"]\nsupervision_split = "valid_seen"\nsupervision_tasks = "0:4"\n'
           'supervision_episode_tasks = ""\nmax_pairs = 12\nanalyzer = "template"\ntop_k = 5\nsplit = "valid_unseen"\n'
           'tf_tasks = "0:2"\n'
           'episode_tasks = ""\nmax_steps = 3\nfraction = 0.2\nn_examples = 2\ncarriers = "all"\nprofile = "smoke"\n'
           'reports_dir = "../runs/nb-smoke/reports"\nruns_dir = "../runs/nb-smoke"'),
    code('reports = Reports(reports_dir, "03_utilization", parameters=dict(models=models, supervision_split=supervision_split,\n'
         '    supervision_tasks=supervision_tasks, max_pairs=max_pairs, analyzer=analyzer, top_k=top_k, split=split,\n'
         '    tf_tasks=tf_tasks, episode_tasks=episode_tasks, max_steps=max_steps, fraction=fraction, profile=profile,\n'
         '    supervision_episode_tasks=supervision_episode_tasks))\n'
         'lms = {name: lm for name in models if (lm := try_load_model(name)) is not None}\n'
         'heads_dirs = {name: f"{runs_dir}/02_retrieval_heads/{name}" for name in lms}\n'
         'heads = {name: retrieval_heads(lm, build_supervision(lm, supervision_split, supervision_tasks, heads_dirs[name],\n'
         '                                                     analyzer=analyzer, max_pairs=max_pairs,\n'
         '                                                     episode_tasks=supervision_episode_tasks, max_steps=max_steps),\n'
         '                         heads_dirs[name]).top_k(top_k)\n'
         '         for name, lm in lms.items()}\n'
         'heads'),
    md("## C for every task, and the segment-masking test"),
    code('runs = {name: segment_masking(lm, heads[name], split, tf_tasks, f"{runs_dir}/03_utilization/{name}",\n'
         '                              episode_tasks=episode_tasks, max_steps=max_steps, fraction=fraction,\n'
         '                              carrier_heads=None if carriers == "none" else carriers)\n'
         '        for name, lm in lms.items()}\n'
         'patterns = pd.DataFrame({name: pd.Series([r.pattern or ("no error" if r.critical_step is None else "no ideal segment")\n'
         '                                          for r in records]).value_counts() for name, (_, records) in runs.items()}).fillna(0)\n'
         'reports.table(patterns, f"utilization_patterns_{split}", floatfmt=".0f")\npatterns'),
    md("## Figure 4: utilization matrices of representative tasks"),
    code('for name, (_, records) in runs.items():\n'
         '    for i, record in enumerate(representative(records, n_examples)):\n'
         '        fig = episode_utilization_figure(record)\n'
         '        reports.figure(fig, f"fig4_utilization_{split}_{name}_{i}")\n'
         '        display(fig)'),
    code('record = representative(next(iter(runs.values()))[1], 1)[0]\n'
         'segments = pd.DataFrame({"c_mean": record.c_mean, "c_max": record.c_max, "text": record.segment_texts},\n'
         '                        index=pd.Index([f"s{l}" for l in range(len(record.c_max))], name="segment"))\n'
         'reports.table(segments, f"segment_utilization_{split}")\nsegments'),
    md("## Figure 3: removing the top vs bottom segments by peak utilization"),
    code('for name, (result, _) in runs.items():\n'
         '    fig = segment_masking_figure(result, title=f"Segment masking, {name}, {split}")\n'
         '    reports.figure(fig, f"fig3_segment_masking_{split}_{name}")\n'
         '    display(fig)\n'
         'table = pd.concat({name: result.table() for name, (result, _) in runs.items()}, names=["model"])\n'
         'reports.table(table, f"segment_masking_{split}")\n'
         'reports.metrics({name: {"heads": heads[name], **result.metrics()} for name, (result, _) in runs.items()})\n'
         'table'),
    md("## Explorer\n\nPick a task, then a step: the segments ranked by utilization at that step, the action "
       "taken (and the expert's) and the heads that carried the most attention mass to each segment."),
    code('utilization_explorer(next(iter(runs.values()))[1])'),
])
