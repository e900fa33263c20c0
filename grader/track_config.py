"""What grader/rungs.json says about a track: its programs, libraries, problem lists and how
its program reports. Apart from track.py so that handout.py can read it without importing the
track grader (which imports handout.py)."""

# A track's settings that follow from its name unless rungs.json says otherwise ({t}: the track).
DEFAULTS = {"program": "{t}_ladder", "library": "{t}_track", "host_library": "{t}_host",
            "public": "grader/{t}_public.problems", "practice": "grader/{t}_practice.problems",
            "hidden": "grader/hidden/{t}_hidden.problems"}


def track_settings(config, track):
    """The track's section of rungs.json over DEFAULTS. Raises ValueError for a track without one."""
    tracks = config.get("tracks", {})
    if track not in tracks:
        raise ValueError(f"grader/rungs.json has no \"tracks\" entry for track {track}")
    return {**{k: v.format(t=track) for k, v in DEFAULTS.items()}, **tracks[track]}


def settings(config, rung):
    """(the track's settings (track_settings), the rung's number) for TRACK-NN."""
    track, number = rung.split("-")
    try:
        return track_settings(config, track), number
    except ValueError as e:
        raise ValueError(f"rung {rung}: {e}") from None


DEFAULT_REPORT = {"check": "vs_oracle", "floors": None, "direction": None,
                  "floors_about": {"memory": "read x, write the output: measured",
                                   "compute": "the convolution at the FP32 peak"}}


def report_settings(t, number):
    """How the track's program reports rung `number`: DEFAULT_REPORT (p38_ladder's), updated by
    the track's "report" and then the rung's own."""
    return {**DEFAULT_REPORT, **t.get("report", {}), **t.get("rungs", {}).get(number, {}).get("report", {})}
