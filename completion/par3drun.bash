# bash completion for par3drun and p3d-worker.
#
# The option names come from the program's own --help at completion time
# (the same table the parser uses), so a new option completes without a change
# here. Only the value kinds below are known to this file: files, directories,
# bundled topologies and policies, and the words an option accepts.

_par3drun_opts()
{
    # $1: the program, $2: the subcommand or empty
    "$1" ${2:+"$2"} --help 2>/dev/null | sed -n 's/^  \(--[a-z0-9][a-z0-9_-]*\).*/\1/p'
}

_par3drun()
{
    local cur prev words cword
    _init_completion -n = || return

    local i sub=""
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        --) # the program and its arguments: complete as a command line
            _command_offset $((i + 1))
            return
            ;;
        topo | plan | cluster | status | preflight | runs) [[ $i == 1 ]] && sub=${words[i]} ;;
        esac
    done

    local opt=$prev
    if [[ $cur == --*=* ]]; then
        opt=${cur%%=*}
        cur=${cur#*=}
    fi
    case $opt in
    --cluster | --slurm-topology | --output | --env-file | --rdzv-token-file)
        _filedir
        return
        ;;
    --log-dir | --run-dir)
        _filedir -d
        return
        ;;
    --topology)
        COMPREPLY=($(compgen -W "local synthetic: dgx-h100.xml dgx-a100.xml dgx1-v100.xml pcie8-nvlink-pairs.xml pcie4.xml cpu-only.xml gb200-tray.xml" -- "$cur"))
        _filedir
        return
        ;;
    --policy)
        COMPREPLY=($(compgen -W "megatron devicemesh naive auto" -- "$cur"))
        _filedir lua
        return
        ;;
    --format) COMPREPLY=($(compgen -W "text json svg html" -- "$cur")); return ;;
    --bind) COMPREPLY=($(compgen -W "numa core none" -- "$cur")); return ;;
    --slow-node) COMPREPLY=($(compgen -W "report replace" -- "$cur")); return ;;
    --dtype) COMPREPLY=($(compgen -W "bf16 fp16 fp32" -- "$cur")); return ;;
    --recompute) COMPREPLY=($(compgen -W "none selective full" -- "$cur")); return ;;
    --rdzv) COMPREPLY=($(compgen -W "auto pmix slurm static: k8s etcd:" -- "$cur")); return ;;
    --older-than) COMPREPLY=($(compgen -W "1h 12h 1d 7d 2w" -- "$cur")); return ;;
    --nproc-per-node | --nproc_per_node) COMPREPLY=($(compgen -W "gpu cpu auto" -- "$cur")); return ;;
    --start-method | --start_method) COMPREPLY=($(compgen -W "spawn fork forkserver" -- "$cur")); return ;;
    --numa-binding | --numa_binding) COMPREPLY=($(compgen -W "node exclusive" -- "$cur")); return ;;
    --rdzv-backend | --rdzv_backend) COMPREPLY=($(compgen -W "c10d static etcd etcd-v2" -- "$cur")); return ;;
    --event-log-handler | --event_log_handler) COMPREPLY=($(compgen -W "null" -- "$cur")); return ;;
    --python) _filedir; return ;;
    --model) COMPREPLY=($(compgen -W "gpt3-175b llama2-70b llama3-8b deepseek-v3 mixtral-8x22b" -- "$cur")); return ;;
    esac
    # an option with a METAVAR we know nothing about: no guess
    if [[ $prev == --* ]] && "${words[0]}" ${sub:+"$sub"} --help 2>/dev/null | grep -q -- "^  $prev [A-Z0-9]"; then
        return
    fi

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_par3drun_opts "${words[0]}" "$sub")" -- "$cur"))
    elif [[ $cword == 1 ]]; then
        COMPREPLY=($(compgen -W "topo plan cluster status preflight runs $(_par3drun_opts "${words[0]}" "")" -- "$cur"))
    elif [[ $sub == status || $sub == runs ]]; then
        _filedir -d # the run directory, or where run directories are
    fi
}
complete -F _par3drun par3drun

_p3d_worker()
{
    local cur prev words cword
    _init_completion || return
    case $prev in
    --checkpoint-dir) _filedir -d; return ;;
    --backend) COMPREPLY=($(compgen -W "cpu cuda auto" -- "$cur")); return ;;
    --p2p) COMPREPLY=($(compgen -W "buffered strict" -- "$cur")); return ;;
    esac
    [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$(_par3drun_opts "${words[0]}" "")" -- "$cur"))
}
complete -F _p3d_worker p3d-worker
