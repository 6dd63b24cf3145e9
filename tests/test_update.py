"""Updating a fork with cruft: a project created from the template at commit A takes the template's
commit B with `cruft update -y` (its version too), keeping the team's own changes, and
`.cruft.json` then names B. And a fork of the previous release, its job run to a checkpoint, updated
to this version, whose job resumes that checkpoint as CHANGELOG.md says."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import TEMPLATE, rendering_env

CRUFT = Path(sys.executable).with_name("cruft")
GIT_IDENTITY = ["-c", "user.name=Template Test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"]
NOT_TEMPLATE = shutil.ignore_patterns(".git", ".venv", "demo", "bench-out", "__pycache__", ".pytest_cache",
                                      ".ruff_cache", "*.egg-info")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *GIT_IDENTITY, *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def cruft(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CRUFT), *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_cruft_update_brings_template_changes_into_a_fork(tmp_path: Path) -> None:
    template = tmp_path / "template"
    shutil.copytree(TEMPLATE, template, ignore=NOT_TEMPLATE)
    git(template, "init", "-q", "-b", "main")
    commit_a = commit_all(template, "A")

    created = cruft(tmp_path, "create", "--no-input", "--output-dir", str(tmp_path / "forks"), str(template))
    assert created.returncode == 0, created.stdout + created.stderr
    project = tmp_path / "forks" / "color-counts"
    cruft_state = json.loads((project / ".cruft.json").read_text())
    assert cruft_state["commit"] == commit_a
    assert cruft_state["context"]["cookiecutter"]["input_topic"] == "events"

    # The team owns its fork: a git repository with its own changes.
    git(project, "init", "-q", "-b", "main")
    commit_all(project, "generated")
    job = project / "job.toml"
    job.write_text(job.read_text().replace("max_record_bytes = 65536", "max_record_bytes = 131072"))
    commit_all(project, "our own setting")

    # The template moves on: a changed file and a new rendered one.
    slug_dir = template / "{{cookiecutter.project_slug}}"
    with (slug_dir / "Makefile").open("a") as makefile:
        makefile.write("\n# template change B\n")
    (slug_dir / "UPGRADING.md").write_text("# Upgrading {{ cookiecutter.project_name }}\n")
    # A release: cruft renders B with B's private variables, not those .cruft.json recorded at A.
    answers = template / "cookiecutter.json"
    released = json.loads(answers.read_text()) | {"_template_version": "99.0.0"}
    answers.write_text(json.dumps(released, indent=2) + "\n")
    commit_b = commit_all(template, "B")
    assert cruft(project, "check").returncode != 0, "cruft check must say the fork is behind"

    updated = cruft(project, "update", "-y")
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert (project / "Makefile").read_text().endswith("# template change B\n")
    assert (project / "UPGRADING.md").read_text() == "# Upgrading Color Counts\n"
    assert "max_record_bytes = 131072" in job.read_text(), "the team's own change must survive"
    assert '__version__ = "99.0.0"' in (project / "src" / "color_counts" / "__init__.py").read_text()
    assert json.loads((project / ".cruft.json").read_text())["commit"] == commit_b
    assert cruft(project, "check").returncode == 0


# The previous release and this version, with a job between them: what docs/upgrading.md tells a
# fork to do, run end to end on a real Kafka (`kafka up`, as the README's by-hand block starts one).
CHANGELOG = TEMPLATE / "CHANGELOG.md"
RELEASE = re.compile(r"^## (\d+\.\d+\.\d+) \(", re.MULTILINE)
# Events produced and the answers checked by this version's tools, apart from either job.
SAMPLE = """
import json, sys
from pathlib import Path

from pyspark.sql import SparkSession

from color_counts.config import load_config
from color_counts.pipeline import query
from color_counts_tools.readback import read_published
from color_counts_tools.sample import configured_sample, produce, spark_filter
from color_counts_tools.verify import Expected, verify

command, job_file, bootstrap, record = sys.argv[1], Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
config = load_config(job_file, {"bootstrap_servers": bootstrap})
if command == "produce":
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    sample = configured_sample(config, spark_filter(spark, config.filter, config.schema), 3000,
                               seed=int(sys.argv[5]), malformed_rate=0.01)
    produce(config.bootstrap_servers, config.input_topic, sample.values, partitions=4)
    kept = json.loads(record.read_text()) if record.exists() else {"events": [], "malformed": []}
    kept["events"] += sample.kept_events
    kept["malformed"] += [value.hex() for value in sample.malformed_values]
    record.write_text(json.dumps(kept))
else:
    kept = json.loads(record.read_text())
    published = read_published(config.bootstrap_servers, config.output_topic, config.dead_letter_topic)
    expected = Expected.of(lambda events: query.model(events, config), kept["events"], query.OUTPUT)
    verdict = verify(published, expected, [bytes.fromhex(value) for value in kept["malformed"]])
    print(f"lost {verdict.lost}, duplicated {verdict.duplicated}, dead letters ok {verdict.dead_letter_ok}",
          *verdict.problems[:10], sep="\\n")
    sys.exit(0 if verdict.exactly_once else 1)
"""


def previous_release() -> tuple[str, str]:
    """The release before this version, and its commit: the one that set `_template_version` to it.
    That is CHANGELOG.md's newest release while an "Unreleased" entry is on top, else the one below."""
    changelog = CHANGELOG.read_text()
    releases = RELEASE.findall(changelog)
    version = releases[0] if "\n## Unreleased\n" in changelog else releases[1]
    found = subprocess.run(["git", "log", "-1", "--format=%H", f"-S\"_template_version\": \"{version}\"", "--",
                            "cookiecutter.json"], cwd=TEMPLATE, capture_output=True, text=True, check=False)
    assert found.returncode == 0 and found.stdout.strip(), (
        f"no commit of the template's history sets _template_version to {version}: this test needs the "
        f"template as a full git clone (not a shallow one, not a copy) {found.stderr}")
    return version, found.stdout.strip()


def checkpoint_steps_since(version: str) -> list[str]:
    """What CHANGELOG.md's entries newer than `version` say running jobs' checkpoints need."""
    newer = CHANGELOG.read_text().split(f"\n## {version} (", 1)[0]
    return re.findall(r"^Checkpoints: (.*)$", newer, re.MULTILINE)


def test_a_fork_of_the_previous_release_updated_to_this_version_resumes_its_checkpoint_exactly(
    tmp_path: Path, project_python: Path
) -> None:
    """A fork rendered at the previous release runs its job to a checkpoint on a real Kafka;
    `cruft update` brings it to this version, which resumes that checkpoint on more input. The
    output then holds every answer and dead letter once, as CHANGELOG.md's "Checkpoints: nothing
    to do" promises for each newer entry (a promise of a refusal instead would be checked here)."""
    version, release = previous_release()
    steps = checkpoint_steps_since(version)
    assert steps and all(step.startswith("**nothing to do.**") for step in steps), (
        f"CHANGELOG.md asks running jobs for more than nothing since {version}: {steps}; this test "
        "must then expect the refusal the entry names")

    # The template as a repository: its history up to this commit, then the work tree as it is.
    template = tmp_path / "template"
    subprocess.run(["git", "clone", "-q", str(TEMPLATE), str(template)], check=True)
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=TEMPLATE,
                             capture_output=True, text=True, check=True).stdout.split("\0")
    git(template, "rm", "-rq", ".")
    for name in filter(None, tracked):
        if (TEMPLATE / name).is_file():
            (template / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(TEMPLATE / name, template / name)
    git(template, "add", "-A")
    git(template, "commit", "-q", "--allow-empty", "-m", "this version")

    created = cruft(tmp_path, "create", "--no-input", "--checkout", release, "--output-dir", str(tmp_path / "forks"),
                    str(template))
    assert created.returncode == 0, created.stdout + created.stderr
    fork = tmp_path / "forks" / "color-counts"
    assert f'__version__ = "{version}"' in (fork / "src" / "color_counts" / "__init__.py").read_text()
    git(fork, "init", "-q", "-b", "main")
    commit_all(fork, "generated")

    env = rendering_env(fork, "KAFKA_BOOTSTRAP_SERVERS")  # `kafka up` gives the broker
    (tmp_path / "sample.py").write_text(SAMPLE)
    kept = tmp_path / "kept.json"

    def run(*command: str, tools: bool = False) -> str:
        module = "color_counts_tools" if tools else "color_counts"
        done = subprocess.run([str(project_python), "-m", module, *command], cwd=fork, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"{module} {' '.join(command)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        return done.stdout

    def sample(command: str, *args: str) -> None:
        # This version's tools, whatever the fork holds: they check the job, they are not under test.
        checked = subprocess.run([str(project_python), str(tmp_path / "sample.py"), command, str(fork / "job.toml"),
                                  bootstrap, str(kept), *args], capture_output=True, text=True, timeout=600,
                                 check=False)
        assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]

    kafka_dir = str(tmp_path / "kafka")
    exported = run("kafka", "up", "--env", "--workdir", kafka_dir, tools=True).strip().splitlines()[-1]
    bootstrap = exported.removeprefix("export KAFKA_BOOTSTRAP_SERVERS=")
    env["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    try:
        run("topics", "create")
        sample("produce", "1")
        first = run("run", "--until-idle", "3")
        assert (fork / "checkpoints" / "commits").is_dir(), first[-3000:]

        updated = cruft(fork, "update", "-y")
        assert updated.returncode == 0, updated.stdout + updated.stderr
        assert json.loads((fork / ".cruft.json").read_text())["commit"] == git(template, "rev-parse", "HEAD")

        sample("produce", "2")
        run("run", "--until-idle", "3")
        sample("verify")
    finally:
        run("kafka", "down", "--workdir", kafka_dir, tools=True)
