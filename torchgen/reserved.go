package torchgen

import (
	"fmt"
	"slices"
	"strings"
)

// torchAttributes are the names an nn.Module (torch 2.14.1's
// dir(torch.nn.Module()), and what fully_shard's FSDPModule adds) already
// has. PyTorch cannot give a child module or a parameter one of them:
// add_module and register_parameter raise KeyError, and get_submodule,
// which apply_plan and every FQN lookup use, returns the attribute instead.
// torchPrivate holds the private ones. Regenerate both with
//
//	python3 -c 'import torch.nn as nn; from torch.distributed.fsdp import FSDPModule; print(sorted(set(dir(nn.Module())) | set(dir(FSDPModule))))'
var torchAttributes = strings.Fields(`T_destination add_module apply bfloat16 buffers call_super_init children
compile cpu cuda double dump_patches eval extra_repr float forward get_buffer get_extra_state
get_parameter get_submodule half ipu load_state_dict modules mtia named_buffers named_children
named_modules named_parameters parameters register_backward_hook register_buffer
register_forward_hook register_forward_pre_hook register_full_backward_hook
register_full_backward_pre_hook register_load_state_dict_post_hook register_load_state_dict_pre_hook
register_module register_parameter register_state_dict_post_hook register_state_dict_pre_hook
requires_grad_ set_extra_state set_submodule share_memory state_dict to to_empty train training type
xpu zero_grad
reset_iter_state reshard set_all_reduce_hook set_allocate_memory_from_process_group_for_comm
set_custom_all_gather set_custom_reduce_scatter set_force_sum_reduction_for_comms
set_gradient_divide_factor set_is_last_backward set_modules_to_backward_prefetch
set_modules_to_forward_prefetch set_post_optim_event set_reduce_scatter_divide_factor
set_reduce_scatter_max_input_buffers set_reduce_scatter_unused_params set_requires_all_reduce
set_requires_gradient_sync set_reshard_after_backward set_reshard_after_forward
set_separate_reduce_scatter_group set_symm_mem_for_comm set_unshard_in_backward unshard`)

// torchPrivate are nn.Module's and FSDPModule's private attributes.
var torchPrivate = strings.Fields(`_apply _backward_hooks _backward_pre_hooks _buffers _call_impl
_compiled_call_impl _forward_hooks _forward_hooks_always_called _forward_hooks_with_kwargs
_forward_pre_hooks _forward_pre_hooks_with_kwargs _get_backward_hooks _get_backward_pre_hooks
_get_name _is_full_backward_hook _load_from_state_dict _load_state_dict_post_hooks
_load_state_dict_pre_hooks _maybe_warn_non_full_backward_hook _modules _named_members
_non_persistent_buffers_set _parameters _register_load_state_dict_pre_hook _register_state_dict_hook
_replicate_for_data_parallel _save_to_state_dict _slow_forward _state_dict_hooks _state_dict_pre_hooks
_version _wrapped_call_impl _get_fsdp_state _orig_cls_mro_index _set_unshard_async_op`)

// torchName refuses a module's or parameter's own name that PyTorch
// cannot register (torchAttributes, torchPrivate, or a __dunder__). fsdpc
// plans such a model, but no nn.Module has it.
func torchName(what, fqn string) error {
	name := fqn[strings.LastIndexByte(fqn, '.')+1:]
	if strings.HasPrefix(name, "__") || slices.Contains(torchAttributes, name) || slices.Contains(torchPrivate, name) {
		return fmt.Errorf("%s %s: PyTorch cannot name a child module or parameter %q, an attribute every nn.Module (or FSDPModule) has: add_module and register_parameter refuse it, get_submodule returns the attribute; rename it in the model file", what, fqn, name)
	}
	return nil
}
