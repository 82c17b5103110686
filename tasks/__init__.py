"""Tasks from any repository: feature deletion, sealed workspaces, grading.

    tasks = synthesize(repo, out)                    # tasks.synth: out/tasks.jsonl + snapshots/ + gold/
    workspace = make_workspace(task, task_file, dest)  # tasks.seal: a fresh sealed git repository
    result = grade(task, task_file, workspace)        # tasks.grade: the original tests decide

Importing this package imports nothing else: each module is imported where it is used.
"""
