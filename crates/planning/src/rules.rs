//! The planning rules that need stored data: dependencies name tasks of the same plan and
//! never form a cycle. Pure functions; the stores call them inside the transaction that
//! writes, so that concurrent writers cannot together create what each alone could not.

use std::collections::{HashMap, HashSet};

use crate::model::{Refusal, RefusalCode};

/// Removes repeated ids, keeping the first occurrence (a dependency listed twice is one
/// dependency).
pub fn distinct(deps: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::with_capacity(deps.len());
    deps.into_iter()
        .filter(|d| seen.insert(d.clone()))
        .collect()
}

/// Refuses dependencies that name no task of the plan. `known` answers whether an id is a
/// task of the same plan.
pub fn check_known(deps: &[String], known: impl Fn(&str) -> bool) -> Result<(), Refusal> {
    let unknown: Vec<&str> = deps
        .iter()
        .map(String::as_str)
        .filter(|d| !known(d))
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(Refusal::new(
            RefusalCode::UnknownDependency,
            format!(
                "dependencies name no task of this plan: {}",
                unknown.join(", ")
            ),
        ))
    }
}

/// Refuses giving `task` the dependencies `deps` when that closes a cycle in `graph` (each
/// task's current dependencies; `task`'s own entry is replaced by `deps`). The message names
/// the cycle, starting and ending at `task`.
pub fn check_acyclic(
    graph: &HashMap<String, Vec<String>>,
    task: &str,
    deps: &[String],
) -> Result<(), Refusal> {
    // Depth-first search from the new dependencies for a path back to `task`.
    let mut parent: HashMap<&str, &str> = HashMap::new();
    let mut stack: Vec<&str> = Vec::new();
    for dep in deps {
        if parent.insert(dep.as_str(), task).is_none() {
            stack.push(dep.as_str());
        }
    }
    while let Some(node) = stack.pop() {
        if node == task {
            let mut cycle = vec![task];
            let mut at = parent.get(task).copied().unwrap_or(task);
            while at != task {
                cycle.push(at);
                at = parent.get(at).copied().unwrap_or(task);
            }
            cycle.push(task);
            cycle.reverse();
            return Err(Refusal::new(
                RefusalCode::DependencyCycle,
                format!(
                    "the dependencies would form a cycle: {}",
                    cycle.join(" -> ")
                ),
            ));
        }
        for next in graph.get(node).map(Vec::as_slice).unwrap_or_default() {
            if !parent.contains_key(next.as_str()) {
                parent.insert(next.as_str(), node);
                stack.push(next.as_str());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> HashMap<String, Vec<String>> {
        edges
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.iter().map(|d| (*d).to_owned()).collect()))
            .collect()
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|d| (*d).to_owned()).collect()
    }

    #[test]
    fn a_task_depending_on_itself_is_a_cycle() {
        let refused = check_acyclic(&HashMap::new(), "t1", &ids(&["t1"])).unwrap_err();
        assert_eq!(refused.code, RefusalCode::DependencyCycle);
        assert!(refused.message.ends_with("t1 -> t1"), "{}", refused.message);
    }

    #[test]
    fn a_cycle_through_other_tasks_is_named_in_order() {
        // t2 -> t3 exists; giving t3 the dependency t2 closes t3 -> t2 -> t3.
        let g = graph(&[("t2", &["t3"])]);
        let refused = check_acyclic(&g, "t3", &ids(&["t2"])).unwrap_err();
        assert!(
            refused.message.ends_with("t3 -> t2 -> t3"),
            "{}",
            refused.message
        );
        let g = graph(&[("a", &["b"]), ("b", &["c"])]);
        let refused = check_acyclic(&g, "c", &ids(&["a"])).unwrap_err();
        assert!(
            refused.message.ends_with("c -> a -> b -> c"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn a_diamond_is_not_a_cycle() {
        let g = graph(&[("b", &["d"]), ("c", &["d"])]);
        assert!(check_acyclic(&g, "a", &ids(&["b", "c"])).is_ok());
        // Replacing a task's own edges: a's old edge to itself-in-waiting does not count.
        let g = graph(&[("a", &["b"]), ("b", &[])]);
        assert!(check_acyclic(&g, "b", &ids(&[])).is_ok());
    }

    #[test]
    fn unknown_dependencies_are_all_named() {
        let refused = check_known(&ids(&["t1", "x", "y"]), |d| d == "t1").unwrap_err();
        assert_eq!(refused.code, RefusalCode::UnknownDependency);
        assert!(refused.message.ends_with("x, y"), "{}", refused.message);
    }

    #[test]
    fn repeated_dependencies_count_once() {
        assert_eq!(distinct(ids(&["a", "b", "a"])), ids(&["a", "b"]));
    }
}
