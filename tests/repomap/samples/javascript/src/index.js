import { Cart } from './cart.js';

function checkout(names) {
  const cart = new Cart();
  for (const name of names) {
    cart.addItem(name, 10);
  }
  console.log(cart.receipt());
  return cart.total();
}

checkout(['apple', 'pear']);
