"""The prompt-forgetting study's published figures that the report's panels are read
against (PROTOCOL.md, A), by variant axis (a task's ``dataset_kwargs.axis``)."""

DECODABLE_FROM_TEXT = {"detail": "not decodable from the text", "paraphrase": "not decodable from the text",
                       "genre": "not decodable from the text",
                       "translation": "decodable: 0.81 (Qwen2.5-0.5B), 0.84 (Pythia-160m)"}
LANGUAGE_SWITCHES = "Qwen2.5-0.5B: 4–11 of 32 per scene, mostly into Chinese"
#: the largest |α rebuilt from the direct and relay terms − α measured| over layers
DECOMPOSITION_GAP = 0.06
