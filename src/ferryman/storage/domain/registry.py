"""The run-time registries: models, toolgroups and shields registered over the API, each a :class:`Records`.

A registration is one record of its kind, its id the identifier the caller
chose and its body the wire model's JSON dump; its owner rides in the same
write. Nothing here is backend code: every kernel stores them unchanged.
"""

from __future__ import annotations

from ferryman.api.registry import Model, ToolGroup
from ferryman.api.safety import ShieldResource
from ferryman.storage.domain.kinds import MODEL, SHIELD, TOOLGROUP
from ferryman.storage.domain.records import ModelCodec, Records
from ferryman.storage.kernel.protocol import Kernel


def models(kernel: Kernel) -> Records[Model]:
    """Models registered with ``POST /v1/models``, by identifier."""
    return Records(kernel, MODEL, ModelCodec(Model), lambda model: model.identifier)


def toolgroups(kernel: Kernel) -> Records[ToolGroup]:
    """Toolgroups registered with ``POST /v1/toolgroups``, by identifier."""
    return Records(kernel, TOOLGROUP, ModelCodec(ToolGroup), lambda group: group.identifier)


def shields(kernel: Kernel) -> Records[ShieldResource]:
    """Shields registered with ``POST /v1/shields``, by identifier."""
    return Records(kernel, SHIELD, ModelCodec(ShieldResource), lambda shield: shield.identifier)
